"""`python -m schemas.draft`: the CLI of schemas/draft/__init__.py."""

import sys

from schemas.draft import main

if __name__ == "__main__":
    sys.exit(main())
