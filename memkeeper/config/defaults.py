"""The default configuration as plain data, for start-up without pydantic (generated).

Generated from the schema (memkeeper/config/schema.py) by
:func:`memkeeper.config.doc.render_defaults`; do not edit: ``python -c 'from
memkeeper.config.doc import render_defaults as r; print(r(), end="")' > /tmp/defaults.py &&
mv /tmp/defaults.py memkeeper/config/defaults.py`` (through a file elsewhere: importing the
schema reads this module, so it must not be emptied first; tests/test_config_view.py checks
the two match).
:mod:`memkeeper.config.view` reads it when no config file exists, so that the memory commands
start without building the schema (README, Performance: start-up).
"""

from typing import Any

DEFAULTS: dict[str, Any] = {
    "database": {
        "path": "",
        "url": "",
        "connect_timeout_s": 10,
        "pool_size": 4,
        "cold_path": "",
        "busy_timeout_ms": 5000,
        "batch_size": 500,
        "lock_hold_ms": 20,
        "synchronous": "normal",
        "cache_mb": 24,
        "mmap_mb": 0,
    },
    "limits": {
        "max_value_bytes": 65536,
        "max_key_chars": 256,
    },
    "context": {
        "limit": 10,
        "min_confidence": 0.7,
    },
    "scoring": {
        "weight_confidence": 0.4,
        "weight_confirmed": 0.2,
        "weight_recency": 0.25,
        "weight_frequency": 0.15,
        "confirmed_half_life_days": 90,
        "recency_half_life_days": 30,
        "frequency_saturation": 20,
    },
    "search": {
        "enabled": True,
        "limit": 3,
        "fusion": "anchored",
        "weight_similarity": 1.0,
        "weight_vector_reorder": 0.2,
        "weight_vector_added": 0.9,
        "weak_keyword_relevance": 0.15,
        "sure_z_low": 2.0,
        "sure_z_high": 8.0,
        "weight_keyword": 1.0,
        "rrf_k": 60,
        "vector_candidates": 100,
        "prior_weight": 0.01,
        "weight_confidence": 3.0,
        "weight_recency": 1.0,
        "recency_half_life_days": 30,
        "min_similarity": 0.3,
        "local_min_similarity": 0.25,
        "outlier_p": 0.01,
        "context_episodes": 5,
        "embedder": "auto",
        "local_model": "sentence-transformers/all-MiniLM-L6-v2",
        "local_model_path": "",
        "embedding_base_url": "",
        "embedding_api_key_env": "",
        "embedding_model": "embedding-3",
        "embedding_dimensions": 512,
        "query_timeout_s": 3.0,
        "index_batch": 32,
        "index_max_calls_per_run": 200,
        "index_concurrency": 2,
    },
    "jobs": {
        "expire": {
            "enabled": True,
            "schedule": "0 3 * * *",
            "ttl_days": {
                "fact": 180,
                "preference": 30,
                "note": 90,
            },
            "review_grace_days": 14,
        },
        "demote": {
            "enabled": True,
            "schedule": "0 4 1 * *",
            "min_confidence": 0.5,
            "unused_days": 30,
        },
        "prune": {
            "enabled": True,
            "schedule": "30 3 * * *",
            "max_facts": 50,
        },
        "retain": {
            "enabled": True,
            "schedule": "45 4 * * 0",
            "full_images_days": 365,
            "undo_days": 0,
            "cold_purge_days": 0,
            "vacuum_pages": 25600,
        },
        "settle": {
            "enabled": True,
            "schedule": "15 3 * * *",
            "grey_days": 14,
        },
        "index": {
            "enabled": True,
            "schedule": "*/5 * * * *",
        },
        "merge": {
            "enabled": True,
            "schedule": "45 2 * * *",
            "similarity_threshold": 0.92,
            "min_exact_chars": 6,
            "llm_merge": True,
            "note_min_similarity": 0.8,
            "max_llm_calls_per_run": 20,
            "full_scan_days": 7,
        },
        "summarize": {
            "enabled": True,
            "schedule": "0 * * * *",
            "max_messages": 20,
            "keep_recent": 10,
            "summarized_retention_days": 0,
            "input_budget_tokens": 6000,
            "min_summary_chars": 20,
            "max_calls_per_run": 200,
            "max_tokens_per_run": 2000000,
            "max_calls_per_user": 50,
            "max_tokens_per_user": 400000,
            "max_concurrency": 4,
            "extract": {
                "enabled": True,
                "min_confidence": 0.7,
                "max_candidates": 30,
                "max_value_bytes": 1024,
            },
            "parking": {
                "after_failures": 3,
                "retry_after_days": 7,
            },
        },
    },
    "llm": {
        "model": "glm-4.7-flash",
        "base_url": "",
        "api_key_env": "ZHIPUAI_API_KEY",
        "timeout_seconds": 60,
        "max_retries": 3,
        "retry_backoff_seconds": 1.0,
        "temperature": 0.3,
        "max_output_tokens": 1024,
        "disable_thinking": True,
        "json_mode": True,
    },
    "service": {
        "timezone": "UTC",
        "lock_wait_seconds": 60,
        "takeover_seconds": 15,
    },
    "logging": {
        "level": "info",
        "format": "auto",
    },
    "status": {
        "warn_changes_rows": 5000000,
        "warn_changes_mb": 1024,
        "warn_wal_mb": 256,
    },
    "mcp": {
        "token_file": "",
        "max_request_bytes": 1048576,
        "allowed_hosts": "",
        "allowed_origins": "",
        "session_idle_seconds": 300,
        "max_sessions_per_principal": 16,
    },
}
