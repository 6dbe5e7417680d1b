package skill

import (
	"bytes"
	"strings"
)

const (
	byteOrderMark = "\xef\xbb\xbf"
	delimiter     = "---"
	fieldFM       = "spec.frontMatter"
	fieldBody     = "spec.instructions"
)

// ParseSkillMD reads a SKILL.md: its front matter and its body. The result has
// no Files. It fails when the file has no front matter, when the front matter
// is not closed, is not valid YAML, is not a YAML mapping or repeats a key,
// and when the file could not be written back byte for byte (see the package
// documentation on line endings). Problems with the values themselves (a bad
// name, a missing description) are left to Validate, which reports them all.
func ParseSkillMD(data []byte) (*Skill, error) {
	doc, err := splitSkillMD(string(data))
	if err != nil {
		return nil, err
	}
	fields, err := readFrontMatter(doc.frontMatter, doc.frontMatterLine)
	if err != nil {
		return nil, err
	}
	s := &Skill{
		Name:          fields.name,
		Description:   fields.description,
		License:       fields.license,
		Compatibility: fields.compatibility,
		AllowedTools:  fields.tools,
		Metadata:      fields.metadata,
		Invocation:    InvocationAuto,
		FrontMatter:   doc.frontMatter,
		Body:          doc.body,
		BOM:           doc.bom,
	}
	if fields.explicit {
		s.Invocation = InvocationExplicit
	}
	return s, nil
}

// document is a SKILL.md cut into its parts.
type document struct {
	bom             bool
	frontMatter     string
	body            string
	frontMatterLine int
}

// line is one line of text: its content without the line break, and the
// line break ("\n", "\r\n", or "" for a last line without one).
type line struct {
	content string
	eol     string
}

// cutLine splits the first line off text.
func cutLine(text string) (line, string) {
	i := strings.IndexByte(text, '\n')
	if i < 0 {
		return line{content: text}, ""
	}
	content, eol := text[:i], "\n"
	if strings.HasSuffix(content, "\r") {
		content, eol = content[:len(content)-1], "\r\n"
	}
	return line{content: content, eol: eol}, text[i+1:]
}

// splitSkillMD cuts a SKILL.md into byte order mark, front matter and body,
// refusing what Render could not reproduce byte for byte.
func splitSkillMD(text string) (document, error) {
	var doc document
	if strings.HasPrefix(text, byteOrderMark) {
		doc.bom = true
		text = text[len(byteOrderMark):]
	}
	opening, rest := cutLine(text)
	if opening.content != delimiter {
		return doc, noFrontMatterError(opening.content)
	}
	if opening.eol == "" {
		return doc, syntaxError(1, "SKILL.md holds only a '---' line",
			"write the front matter on the next lines, then a closing '---' line and the instructions")
	}
	doc.frontMatterLine = 2
	closingLine := doc.frontMatterLine
	var closing line
	found := false
	for remaining := rest; remaining != ""; closingLine++ {
		l, next := cutLine(remaining)
		if l.content == delimiter {
			closing, found = l, true
			doc.frontMatter = rest[:len(rest)-len(remaining)]
			doc.body = next
			break
		}
		remaining = next
	}
	if !found {
		return doc, syntaxError(1, "the front matter opened on line 1 is never closed",
			"end the front matter with a line holding only '---', then write the instructions")
	}
	if closing.eol == "" {
		return doc, syntaxError(closingLine, "SKILL.md ends right after the closing '---', without a line break or instructions",
			"write the instructions after the closing '---' line")
	}
	if strings.TrimSpace(doc.frontMatter) == "" {
		return doc, syntaxError(doc.frontMatterLine, "the front matter is empty",
			"write at least `name: my-skill` and `description: ...` between the '---' lines")
	}
	if err := checkDelimiterEOLs(doc.frontMatter, opening.eol, closing.eol, closingLine); err != nil {
		return doc, err
	}
	return doc, nil
}

// noFrontMatterError explains a first line that does not open front matter.
func noFrontMatterError(first string) error {
	trimmed := strings.TrimSpace(strings.TrimPrefix(first, byteOrderMark))
	switch {
	case trimmed == delimiter:
		return syntaxError(1, "the first line must be exactly '---', without spaces around it",
			"remove the spaces around the opening '---'")
	case trimmed == "+++":
		return syntaxError(1, "SKILL.md opens TOML front matter ('+++'), but Agent Skills use YAML",
			"write the front matter as YAML between two '---' lines")
	}
	return syntaxError(1, "SKILL.md does not start with YAML front matter",
		"start the file with a '---' line, then `name: my-skill` and `description: ...`, then a closing '---' line")
}

// checkDelimiterEOLs refuses '---' lines whose line breaks differ from those
// Render would derive from the front matter next to them.
func checkDelimiterEOLs(frontMatter, openEOL, closeEOL string, closingLine int) error {
	wantOpen, wantClose := firstLineEOL(frontMatter), lastLineEOL(frontMatter)
	if openEOL != wantOpen {
		return syntaxError(1, "the opening '---' line ends with "+eolName(openEOL)+
			" but the front matter after it with "+eolName(wantOpen),
			"use one line ending style in SKILL.md, for example with dos2unix")
	}
	if closeEOL != wantClose {
		return syntaxError(closingLine, "the closing '---' line ends with "+eolName(closeEOL)+
			" but the front matter before it with "+eolName(wantClose),
			"use one line ending style in SKILL.md, for example with dos2unix")
	}
	return nil
}

// firstLineEOL is the line break of the first line of text, "\n" when the
// text has none.
func firstLineEOL(text string) string {
	first, _ := cutLine(text)
	if first.eol == "" {
		return "\n"
	}
	return first.eol
}

// lastLineEOL is the line break that ends text, "\n" when it ends without one.
func lastLineEOL(text string) string {
	if strings.HasSuffix(text, "\r\n") {
		return "\r\n"
	}
	return "\n"
}

func eolName(eol string) string {
	if eol == "\r\n" {
		return "CRLF"
	}
	return "LF"
}

func syntaxError(lineNumber int, message, hint string) *SyntaxError {
	return &SyntaxError{Line: lineNumber, Problem: Problem{Field: fieldFM, Message: message, Hint: hint}}
}

// Render writes a skill's SKILL.md: the byte order mark when recorded, the
// front matter between `---` lines, then the body. Skill.FrontMatter is
// written verbatim when set (a line break is added if it lacks a final one);
// otherwise canonical front matter is generated from the fields. The `---`
// lines take the line ending of the front-matter line next to them.
func Render(s *Skill) []byte {
	frontMatter := s.FrontMatter
	if frontMatter == "" {
		frontMatter = generateFrontMatter(s)
	}
	if !strings.HasSuffix(frontMatter, "\n") {
		frontMatter += firstLineEOL(frontMatter)
	}
	var b bytes.Buffer
	b.Grow(len(byteOrderMark) + 2*len(delimiter) + 4 + len(frontMatter) + len(s.Body))
	if s.BOM {
		b.WriteString(byteOrderMark)
	}
	b.WriteString(delimiter)
	b.WriteString(firstLineEOL(frontMatter))
	b.WriteString(frontMatter)
	b.WriteString(delimiter)
	b.WriteString(lastLineEOL(frontMatter))
	b.WriteString(s.Body)
	return b.Bytes()
}
