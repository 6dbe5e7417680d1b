// Package render turns what the console shows, all of it written by
// someone the console does not trust (a skill's author, an agent, the
// commands it ran), into HTML that cannot run anything: Markdown with raw
// HTML off and the result sanitized, output as plain text without terminal
// escapes, and a run's timeline as coordinates for an SVG picture.
package render

import (
	"bytes"
	"html/template"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"
	"github.com/microcosm-cc/bluemonday"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
)

var (
	// markdown is CommonMark with GitHub's tables, strikethrough and task
	// lists. Raw HTML is left out (goldmark's default without WithUnsafe),
	// and so are links whose scheme is not safe.
	markdown = goldmark.New(goldmark.WithExtensions(extension.Table, extension.Strikethrough, extension.TaskList))
	// sanitizer keeps the elements and attributes of user-written HTML
	// that cannot run anything, and only http, https and mailto links.
	sanitizer = func() *bluemonday.Policy {
		p := bluemonday.UGCPolicy()
		p.AllowURLSchemes("http", "https", "mailto")
		p.RequireNoReferrerOnLinks(true)
		p.AddTargetBlankToFullyQualifiedLinks(true)
		return p
	}()
)

// Markdown renders Markdown as sanitized HTML.
func Markdown(source string) template.HTML {
	var b bytes.Buffer
	if err := markdown.Convert([]byte(source), &b); err != nil {
		// goldmark fails only when the writer does; show the text.
		return template.HTML(template.HTMLEscapeString(source)) //nolint:gosec // escaped
	}
	return template.HTML(sanitizer.SanitizeBytes(b.Bytes())) //nolint:gosec // sanitized
}

// Text makes a command's output, or any text an agent wrote, fit to show
// as text: terminal escape sequences are taken out, and other characters
// that are not printable (control characters, bidirectional overrides)
// become U+FFFD. Line breaks and tabs stay. The result is still text: the
// page's template escapes it.
func Text(s string) string {
	s = ansi.Strip(s)
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\n', r == '\t', r == ' ':
			return r
		case r == '\r':
			return -1
		case unicode.IsPrint(r):
			return r
		}
		return utf8.RuneError
	}, s)
}
