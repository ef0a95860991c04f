#!/usr/bin/env python3
"""md2man.py - convert the man page sources docs/man/NAME.SECTION.md into roff (man(7)).

The source format is a small, strict subset of markdown, so that a page reads well as text and
converts without surprises (anything not listed is an error, never silently mangled):

  # HEADING           .SH (NAME, SYNOPSIS, DESCRIPTION, OPTIONS, EXIT STATUS, ...)
  ## Subheading       .SS
  blank line          paragraph break
  TERM                a definition (.TP): a term line followed directly by lines starting with
  : text                ": "; further lines of the definition are indented by two spaces
  - item              a bullet item (.IP); continuation lines indented by two spaces
  ```                 a literal block (no filling, no inline markup) up to the next ```
  **bold** *italic* `literal`   inline fonts (literal text is set in bold, as options are)

In SYNOPSIS every source line is one output line. Dashes that start a word (options, " - ")
become \\- so that a copied option is an ASCII minus; a dash inside a word stays a hyphen.
The title comes from the file name: agentsbx-exec.8.md -> AGENTSBX-EXEC(8).

usage: md2man.py [--version V] [--outdir DIR] FILE.md...   (writes DIR/NAME.SECTION)
"""
import argparse
import os
import re
import sys

INLINE = re.compile(r"\*\*(.+?)\*\*|`([^`]+)`|\*([^*\s][^*]*?)\*")
REQUIRED = ("NAME", "SYNOPSIS", "DESCRIPTION")


class SourceError(Exception):
    pass


def escape(text, all_dashes=False):
    """Roff-escape plain text: backslashes, and dashes (all, or those starting a word)."""
    text = text.replace("\\", "\\e")
    if all_dashes:
        return text.replace("-", "\\-")
    return re.sub(r"(?<![\w.])-", r"\\-", text)


def inline(text, where):
    """Inline markup -> roff font escapes; stray markup characters are an error."""
    out, pos = "", 0
    for m in INLINE.finditer(text):
        out += escape(text[pos:m.start()])
        bold, lit, ital = m.groups()
        # \% at the start of a word holding markup (an option, a literal, a file name, a
        # placeholder): never hyphenate it, a reader copies it; inside a word \% would be a
        # hyphenation point instead
        start = out.rfind(" ") + 1
        if not out.startswith("\\%", start):
            out = out[:start] + "\\%" + out[start:]
        if lit is not None:
            out += "\\fB" + escape(lit, True) + "\\fR"
        elif bold is not None:
            out += "\\fB" + inline(bold, where).replace("\\fR", "\\fB") + "\\fR"
        else:
            out += "\\fI" + escape(ital, True) + "\\fR"
        pos = m.end()
    rest = text[pos:]
    if "*" in rest or "`" in rest:
        raise SourceError("%s: unmatched * or ` in: %s" % (where, text))
    return out + escape(rest)


def line_out(s):
    """A text line must not start with a control character (. or ')."""
    s = s.strip()
    return "\\&" + s if s[:1] in (".", "'") else s


def convert(src, name, section, version):
    lines = src.split("\n")
    out = ['.TH "%s" "%s" "" "agentsbx %s" "System Manager\'s Manual"' % (escape(name.upper(), True), section, version)]
    seen, heading, i, para = [], None, 0, False
    while i < len(lines):
        raw, where = lines[i], "%s.%s.md:%d" % (name, section, i + 1)
        i += 1
        if not raw.strip():
            para = True
            continue
        if raw.startswith("## "):
            out.append(".SS " + inline(raw[3:].strip(), where))
            para = False
        elif raw.startswith("# "):
            heading = raw[2:].strip()
            if heading != heading.upper():
                raise SourceError("%s: section headings are upper case: %s" % (where, heading))
            seen.append(heading)
            out.append('.SH "%s"' % heading)
            para = False
        elif heading is None:
            raise SourceError("%s: text before the first # heading" % where)
        elif raw.startswith("```"):
            out += [".PP", ".RS 4", ".nf"]
            while i < len(lines) and not lines[i].startswith("```"):
                out.append(line_out(escape(lines[i], True)) if lines[i].strip() else "")
                i += 1
            if i == len(lines):
                raise SourceError("%s: unterminated ``` block" % where)
            i += 1
            out += [".fi", ".RE"]
            para = True
        elif heading == "NAME":
            out.append(line_out(escape(raw, True)))
        elif heading == "SYNOPSIS":
            if para:
                out.append(".PP")
            out += [line_out(inline(raw, where)), ".br"]
            para = False
        elif raw.startswith("- "):
            body = [raw[2:]]
            while i < len(lines) and lines[i].startswith("  ") and lines[i].strip():
                body.append(lines[i])
                i += 1
            out += [".IP \\(bu 2"] + [line_out(inline(b, where)) for b in body]
            para = True  # text after a list item starts a new paragraph (.PP resets the indent)
        elif raw.startswith(": "):
            raise SourceError("%s: a ': ' definition needs a term line just above it" % where)
        elif raw.startswith(" "):
            raise SourceError("%s: unexpected indented line (continuation of what?)" % where)
        elif i < len(lines) and lines[i].startswith(": "):
            out += [".TP", line_out(inline(raw, where))]
            out.append(line_out(inline(lines[i][2:], where)))
            i += 1
            while i < len(lines) and lines[i].startswith("  ") and lines[i].strip():
                out.append(line_out(inline(lines[i], where)))
                i += 1
            para = True
        else:
            if para and not out[-1].startswith((".SH", ".SS")):
                out.append(".PP")
            out.append(line_out(inline(raw, where)))
            para = False
    missing = [h for h in REQUIRED if h not in seen]
    if missing:
        raise SourceError("%s.%s.md: missing section(s): %s" % (name, section, ", ".join(missing)))
    return "\n".join(out) + "\n"


def main(argv):
    ap = argparse.ArgumentParser(description="docs/man/*.md -> man(7) roff")
    ap.add_argument("--version", default="unknown", help="version shown in the page footer")
    ap.add_argument("--outdir", default=".", help="where NAME.SECTION is written")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args(argv)
    status = 0
    for path in args.files:
        m = re.fullmatch(r"(.+)\.([1-9][a-z]*)\.md", os.path.basename(path))
        if not m:
            print("md2man: %s: expected a name NAME.SECTION.md" % path, file=sys.stderr)
            status = 1
            continue
        try:
            with open(path, encoding="utf-8") as f:
                roff = convert(f.read(), m.group(1), m.group(2), args.version)
        except (OSError, SourceError) as e:
            print("md2man: %s" % e, file=sys.stderr)
            status = 1
            continue
        target = os.path.join(args.outdir, "%s.%s" % (m.group(1), m.group(2)))
        try:
            os.makedirs(args.outdir, exist_ok=True)
            with open(target + ".tmp", "w", encoding="utf-8") as f:
                f.write(roff)
            os.replace(target + ".tmp", target)  # never leave a half-written page behind
        except OSError as e:
            print("md2man: %s: %s" % (target, e), file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
