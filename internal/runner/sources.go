package runner

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// maxSources is how many files opened for reading the guard remembers
// before it forgets those already closed.
const maxSources = 64

// remember records the path of a file the shell opened for reading, and
// returns what the interpreter gets in its place. The interpreter hands a
// redirection's file to the command as its standard input, an *os.File
// (HandlerContext.Stdin); any other reader it copies into a pipe of its
// own, which would lose the path, so such a reader is copied into a pipe
// here, and the pipe is remembered.
func (g *guard) remember(rwc io.ReadWriteCloser, path string) (io.ReadWriteCloser, error) {
	f, ok := rwc.(*os.File)
	if !ok {
		pr, pw, err := os.Pipe()
		if err != nil {
			_ = rwc.Close()
			return nil, fmt.Errorf("failed to open a pipe for %s: %w", path, err)
		}
		go func() {
			_, _ = io.Copy(pw, rwc)
			_ = pw.Close()
			_ = rwc.Close()
		}()
		f = pr
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.sources == nil {
		g.sources = map[*os.File]string{}
	}
	if len(g.sources) >= maxSources {
		for old := range g.sources {
			if _, err := old.Stat(); errors.Is(err, os.ErrClosed) {
				delete(g.sources, old)
			}
		}
	}
	g.sources[f] = path
	return f, nil
}

// source returns the path of the file a redirection opened when r, a
// command's standard input, is one.
func (g *guard) source(r io.Reader) (string, bool) {
	f, ok := r.(*os.File)
	if !ok || f == nil {
		return "", false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	path, ok := g.sources[f]
	return path, ok
}

// Reads judges a simple command whose standard input is a file that a
// redirection opened, with that file as one more word, as the judge does:
// under a rule `cat ** *secret* **` Never, `cat < secret.txt` is refused
// as `cat secret.txt` would be.
func (e *Enforcer) Reads(args []string, path string) error {
	with := append(args[:len(args):len(args)], path)
	return e.refuse(argvText(args)+" < "+argvText([]string{path}), e.m.DecideArgs(with, e.tools))
}
