// Command standin is the red-team harness's logging stand-in for a payload
// program (touch, rm, curl, ...). The harness hard-links it under each
// payload's name into a folder of its own per case; when run, it appends one
// JSON line to the file standins.log beside that folder, naming the program
// it stands in for (the name of the file that was executed, so a symlink
// counts as its target) and its argv, and exits 0 without doing anything
// else.
//
// It finds its log from its own executable, not from the environment, so a
// line that clears the environment (env -i) is still recorded.
package main

import (
	"encoding/json"
	"os"
	"path/filepath"
)

// call is one line of the log.
type call struct {
	Name string   `json:"name"`
	Argv []string `json:"argv"`
}

func main() {
	exe, err := os.Executable()
	if err != nil {
		os.Exit(70)
	}
	line, err := json.Marshal(call{Name: filepath.Base(exe), Argv: os.Args})
	if err != nil {
		os.Exit(70)
	}
	log := filepath.Join(filepath.Dir(filepath.Dir(exe)), "standins.log")
	f, err := os.OpenFile(log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o666)
	if err != nil {
		os.Exit(70)
	}
	// One write per call: programs of a pipeline run at once, and an
	// O_APPEND write of one line does not mix with theirs.
	if _, err := f.Write(append(line, '\n')); err != nil {
		os.Exit(70)
	}
	_ = f.Close()
}
