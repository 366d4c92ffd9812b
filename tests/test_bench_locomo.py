"""memkeeper bench --locomo: the LoCoMo retrieval evaluation, on a tiny hand-made file in the
public file's format (the real data is never in the suite), with a tiny static model."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from helpers.tiny_model import static_model

from memkeeper.bench import locomo
from memkeeper.cli import main
from memkeeper.config import Config

CONVERSATION = {
    "sample_id": "conv-tiny",
    "conversation": {
        "speaker_a": "Audrey",
        "speaker_b": "Andrew",
        "session_1_date_time": "1:10 pm on 27 March, 2023",
        "session_1": [
            {"speaker": "Audrey", "dia_id": "D1:1", "text": "Hey Andrew, how are you?"},
            {"speaker": "Andrew", "dia_id": "D1:2", "text": "I started a new job as an analyst"},
            {
                "speaker": "Audrey",
                "dia_id": "D1:3",
                "text": "I adopted a puppy",
                "blip_caption": "a photo of a small dog",
                "img_url": ["http://example.invalid/x.jpg"],
            },
        ],
        "session_2_date_time": "9:05 am on 2 April, 2023",
        "session_2": [
            {"speaker": "Andrew", "dia_id": "D2:1", "text": "We moved to Paris last week"},
            {"speaker": "Audrey", "dia_id": "D2:2", "text": "I drink green tea every morning"},
            {
                "speaker": "Andrew",
                "dia_id": "D2:3",
                "text": "Meeting Bob on Friday about the budget",
            },
        ],
    },
    "qa": [
        {
            "question": "Where does Andrew live?",
            "answer": "Paris",
            "evidence": ["D2:1"],
            "category": 4,
        },
        {
            "question": "What is Andrew's job?",
            "answer": "analyst",
            "evidence": ["D:1:2"],
            "category": 1,
        },
        {
            "question": "What did Audrey adopt and drink?",
            "answer": "a puppy; tea",
            "evidence": ["D1:3; D2:02"],
            "category": 1,
        },
        {
            "question": "When did they meet Bob?",
            "answer": "Friday",
            "evidence": ["D2:3", "D9:9"],
            "category": 2,
        },
        {
            "question": "What is Audrey's city?",
            "adversarial_answer": "Paris",
            "evidence": ["D2:1"],
            "category": 5,
        },
        {"question": "Who is Carol?", "answer": "", "evidence": ["D7:1"], "category": 3},
    ],
}


@pytest.fixture
def data_file(tmp_path: Path) -> Path:
    path = tmp_path / "locomo-tiny.json"
    path.write_text(json.dumps([CONVERSATION]), encoding="utf-8")
    return path


def test_the_file_is_read_with_malformed_evidence_normalized_and_unknown_ids_dropped(
    data_file: Path,
) -> None:
    (conversation,) = locomo.load(data_file)
    assert conversation.name == "conv-tiny"
    assert [t.dia_id for t in conversation.turns] == [
        "D1:1",
        "D1:2",
        "D1:3",
        "D2:1",
        "D2:2",
        "D2:3",
    ]
    assert conversation.turns[2].text == "Audrey: I adopted a puppy [image: a photo of a small dog]"
    assert conversation.turns[3].when == datetime(2023, 4, 2, 9, 5, tzinfo=UTC)
    evidence = [q.evidence for q in conversation.questions]
    assert evidence == [("D2:1",), ("D1:2",), ("D1:3", "D2:2"), ("D2:3",), ("D2:1",)]
    assert conversation.dropped == 2  # D9:9 and D7:1 (whose question is left out)


def test_session_dates_parse_at_noon_and_midnight() -> None:
    assert locomo.session_time("12:30 pm on 1 May, 2023").hour == 12
    assert locomo.session_time("12:30 am on 1 May, 2023").hour == 0
    with pytest.raises(ValueError):
        locomo.session_time("yesterday")


def test_the_evaluation_reports_every_system_by_category(data_file: Path, tmp_path: Path) -> None:
    model = static_model(tmp_path / "tiny-model")
    config = Config()
    figures = locomo.run_locomo(
        data_file, config, models=[("tiny", locomo.with_local_model(config, str(model)))]
    )
    systems = figures["systems"]
    assert set(systems) == {
        "memkeeper keyword",
        "bm25",
        "memkeeper hybrid tiny",
        "dense tiny",
        "rrf tiny",
    }
    assert figures["questions"] == 5 and figures["turns"] == 6
    for found in systems.values():
        assert found["overall"]["questions"] == 4 and found["adversarial"]["questions"] == 1
        values = [found["overall"][f"@{k}"] for k in locomo.KS]
        assert values == sorted(values) and all(0 <= v <= 1 for v in values)
    # Six turns: every system finds every evidence turn in its first ten but BM25 and the
    # keyword search, which find only the turns sharing a word with the question.
    assert systems["dense tiny"]["overall"]["@10"] == 1.0
    assert (
        systems["memkeeper hybrid tiny"]["overall"]["@10"]
        >= systems["memkeeper keyword"]["overall"]["@10"]
    )
    assert "conv-tiny" in figures["per_conversation"]
    assert "memkeeper hybrid tiny" in locomo.table(figures)
    # Every question's query embedding is timed apart from its search. The tiny model's
    # word-level vocabulary holds no names: four of the five questions have a third of
    # their words unknown to it and are searched by keywords alone (0 ms embedding).
    latency = figures["latency_ms"]
    assert set(latency) == {"memkeeper keyword", "memkeeper hybrid tiny"}
    assert latency["memkeeper keyword"]["embed_p90_ms"] == 0.0
    hybrid = latency["memkeeper hybrid tiny"]
    assert hybrid["embed_p50_ms"] == 0.0 < hybrid["embed_p90_ms"]
    assert 0 < hybrid["search_p50_ms"] <= hybrid["search_p90_ms"]
    assert "embedding p50" in locomo.table(figures)


def test_the_cli_runs_it(
    data_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = static_model(tmp_path / "tiny-model")
    assert main(["bench", "--locomo", str(data_file), "--model", str(model), "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert "memkeeper hybrid tiny-model" in figures["systems"]
