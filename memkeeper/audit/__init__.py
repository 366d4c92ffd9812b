"""The audit layer: reading the change log, explaining a memory's life.

Writing the log happens in the storage layer, in each change's own transaction
(:mod:`memkeeper.storage.changelog`); undo, which applies changes, is maintenance
(:mod:`memkeeper.maintenance.undo`).
"""
