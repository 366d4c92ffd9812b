"""``python -m memkeeper``: the same command line as the ``memkeeper`` script."""

from memkeeper.cli import entry

if __name__ == "__main__":
    entry()
