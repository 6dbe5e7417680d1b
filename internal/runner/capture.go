package runner

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"
)

// readChunk is the size of one read from an output pipe.
const readChunk = 32 << 10

// capture reads one output stream to its end, keeping the first limit bytes
// and counting all of them.
type capture struct {
	name  string
	file  *os.File
	limit int64
	kept  []byte
	total int64
	// err is set when reading failed for another reason than the end of
	// the stream or abandon.
	err error
}

// newCapture returns a capture of file, named after the stream for errors.
func newCapture(name string, file *os.File, limit int64) *capture {
	return &capture{name: name, file: file, limit: limit}
}

// readAll reads until the end of the stream, an error, or abandon. It must
// run in exactly one goroutine; the other methods may be called once it has
// returned, except abandon which may be called at any time.
func (c *capture) readAll() {
	buf := make([]byte, readChunk)
	for {
		n, err := c.file.Read(buf)
		c.add(buf[:n])
		switch {
		case err == nil:
			continue
		case errors.Is(err, io.EOF), errors.Is(err, os.ErrDeadlineExceeded):
			return
		default:
			c.err = fmt.Errorf("failed to read %s: %w", c.name, err)
			return
		}
	}
}

// add keeps what fits of p under the limit and counts all of it.
func (c *capture) add(p []byte) {
	c.total += int64(len(p))
	if room := c.limit - int64(len(c.kept)); room > 0 {
		c.kept = append(c.kept, p[:min(int64(len(p)), room)]...)
	}
}

// abandon makes a pending or later read return at once, for a stream still
// held open by a process the runner cannot kill.
func (c *capture) abandon() {
	_ = c.file.SetReadDeadline(time.Now())
}

// result returns the captured text as valid UTF-8 of at most limit bytes,
// whether it is shorter than what was written, and the number of bytes
// written.
func (c *capture) result() (text string, truncated bool, total int64) {
	kept := c.kept
	truncated = c.total > int64(len(kept))
	if truncated {
		kept = trimPartialRune(kept)
	}
	text = strings.ToValidUTF8(string(kept), string(utf8.RuneError))
	if int64(len(text)) > c.limit {
		text = truncateUTF8(text, int(c.limit))
		truncated = true
	}
	return text, truncated, c.total
}

// trimPartialRune drops an incomplete UTF-8 sequence at the end of b, which
// a cut at the limit may have split; the rest of it was discarded, so it is
// not invalid output.
func trimPartialRune(b []byte) []byte {
	for i := 1; i < utf8.UTFMax && i <= len(b); i++ {
		c := b[len(b)-i]
		if utf8.RuneStart(c) {
			if c >= utf8.RuneSelf && !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			return b
		}
	}
	return b
}

// truncateUTF8 returns the longest prefix of the valid UTF-8 string s that is
// at most n bytes long and ends on a character boundary.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
