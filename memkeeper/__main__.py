"""``python -m memkeeper``: the same command line as the ``memkeeper`` script."""

from memkeeper.entry import entry

if __name__ == "__main__":
    entry()
