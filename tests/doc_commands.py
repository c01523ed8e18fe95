"""The commands docs/commands_run.txt lists: each verbatim in its document, and
each `run` entry run with bash in a scratch folder (exit 0, its `expect`
patterns found in its output). Used by doc_commands_test.sh, which starts the
demo they run against.

  doc_commands.py LIST WORK GATEWAY_PORT       (from the repository root)
"""
import re
import subprocess
import sys


def entries(path):
    """(kind, file, reason, command lines, expect patterns) per entry."""
    found, current = [], None
    for number, line in enumerate(open(path, encoding="utf-8"), 1):
        line = line.rstrip("\n")
        if not line.strip() or line.startswith("#"):
            continue
        where = f"{path}:{number}"
        if line.startswith("run ") or line.startswith("skip "):
            kind, rest = line.split(" ", 1)
            doc, _, reason = rest.partition(": ") if kind == "skip" else (rest, "", "")
            if kind == "skip" and not reason:
                sys.exit(f"{where}: a skip needs 'FILE: REASON'")
            current = {"kind": kind, "doc": doc.strip(), "reason": reason, "lines": [],
                       "expect": [], "where": where}
            found.append(current)
        elif line.startswith("  ") and current is not None:
            current["lines"].append(line.strip())
        elif line.startswith("expect ") and current is not None:
            current["expect"].append(line[len("expect "):])
        else:
            sys.exit(f"{where}: not an entry, a command or an expect: {line}")
    return found


def same_line(doc_line, command):
    text = doc_line.strip()
    if text == command:
        return True
    return text.startswith(command) and text[len(command):].lstrip().startswith("#")


def verbatim(entry):
    lines = open(entry["doc"], encoding="utf-8").read().splitlines()
    want = entry["lines"]
    return any(all(same_line(lines[start + i], want[i]) for i in range(len(want)))
               for start in range(len(lines) - len(want) + 1))


def main():
    listing, work, gateway_port = sys.argv[1], sys.argv[2], sys.argv[3]
    failed = 0
    all_entries = entries(listing)
    for entry in all_entries:
        if not entry["lines"]:
            print(f"FAIL: {entry['where']}: no command")
            failed += 1
        elif not verbatim(entry):
            print(f"FAIL: {entry['where']}: not in {entry['doc']} as listed:")
            print("\n".join("  " + line for line in entry["lines"]))
            failed += 1
    for entry in all_entries:
        command = "\n".join(entry["lines"])
        if entry["kind"] == "skip":
            print(f"skipped ({entry['doc']}: {entry['reason']}): {entry['lines'][0]}")
            continue
        script = command.replace("127.0.0.1:8000", f"127.0.0.1:{gateway_port}")
        try:
            done = subprocess.run(["bash", "-c", script], cwd=work, timeout=90,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            output, code = done.stdout, done.returncode
        except subprocess.TimeoutExpired as e:
            output, code = (e.stdout or b"").decode(errors="replace"), "timeout (90 s)"
        missing = [p for p in entry["expect"] if not re.search(p, output)]
        if code != 0 or missing:
            print(f"FAIL: {entry['where']} ({entry['doc']}): exit {code}, "
                  f"missing {missing}:\n{command}\n--- its output:\n{output[-3000:]}")
            failed += 1
        else:
            print(f"ok ({entry['doc']}): {entry['lines'][0]}")
    runs = sum(e["kind"] == "run" for e in all_entries)
    print(f"{runs} run, {len(all_entries) - runs} skipped, {failed} failed")
    sys.exit(1 if failed else 0)


main()
