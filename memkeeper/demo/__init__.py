"""`memkeeper demo`.

A year of a few agents' use, maintained on schedule in a temporary database.
"""
