package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/kubeskills/kubeskills/internal/runner"
	"github.com/kubeskills/kubeskills/internal/skill"
)

// unpackSkill implements "runner unpack-skill --to DIR [--expect-hash H]
// SHARD_DIR...".
func unpackSkill(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("unpack-skill", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		_, _ = fmt.Fprint(stderr, "Usage: runner unpack-skill --to DIR [--expect-hash HASH] SHARD_DIR...\n\nFlags:\n")
		fs.PrintDefaults()
	}
	to := fs.String("to", "", "folder that receives the skill; it must be absent or empty")
	expect := fs.String("expect-hash", "", "content hash the skill must have (the one its run was judged and approved with); other content is refused")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return runner.ExitRunnerFailure
	}
	if *to == "" || fs.NArg() == 0 {
		_, _ = fmt.Fprint(stderr, "runner: unpack-skill takes --to DIR and at least one shard folder, shard 0 first\n")
		return runner.ExitRunnerFailure
	}
	name, files, err := unpack(*to, fs.Args(), *expect)
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "runner: %v\n", err)
		return runner.ExitRunnerFailure
	}
	_, _ = fmt.Fprintf(stdout, "runner: unpacked skill %s into %s: SKILL.md and %d files\n", name, *to, files)
	return 0
}

// unpack reads a skill from the folders where its ConfigMap shards are
// mounted and writes its folder into dir: SKILL.md as served and every
// bundled file decoded, read-only, executables runnable. It returns the
// skill's name and the number of bundled files.
//
// The skill is read whole and checked against the manifest's hash before
// anything is written, so shards caught in the middle of an update give an
// error rather than a folder mixing two versions. When expectHash is set,
// the skill must be that content, the one its run was judged on: a skill
// edited after the decision is refused and nothing is written.
func unpack(dir string, shardDirs []string, expectHash string) (string, int, error) {
	bundle, err := skill.OpenShardDirs(shardDirs)
	if err != nil {
		return "", 0, fmt.Errorf("failed to open skill shards: %w", err)
	}
	s, err := bundle.Skill()
	if err != nil {
		return "", 0, fmt.Errorf("failed to read skill: %w", err)
	}
	if got := skill.Hash(s); expectHash != "" && got != expectHash {
		return "", 0, fmt.Errorf("refusing to unpack skill %s: its content is %s, not %s, the content the run was judged and approved with: "+
			"the Skill changed after the decision, so the run must be judged again", s.Name, got, expectHash)
	}
	files := make([]runner.FolderFile, 0, len(s.Files)+1)
	files = append(files, runner.FolderFile{Path: skill.SkillFileName, Content: bundle.SkillMD()})
	for _, f := range s.Files {
		files = append(files, runner.FolderFile{Path: f.Path, Content: f.Content, Executable: f.Executable})
	}
	if err := runner.WriteFolder(dir, files); err != nil {
		return "", 0, fmt.Errorf("failed to unpack skill %s: %w", s.Name, err)
	}
	return s.Name, len(s.Files), nil
}
