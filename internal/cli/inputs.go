package cli

import (
	"fmt"
	"os"
	"strconv"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/skill"
)

// inputKind tells what a path given on the command line is.
type inputKind int

const (
	inputFolder inputKind = iota
	inputFile
)

// statInput tells whether path is a folder or a file, with an error that a
// person can act on when it is neither.
func statInput(path string) (inputKind, error) {
	info, err := os.Stat(path)
	if err != nil {
		if os.IsNotExist(err) {
			return 0, fmt.Errorf("failed to read %s: no such file or folder", path)
		}
		return 0, fmt.Errorf("failed to read %s: %w", path, err)
	}
	switch {
	case info.IsDir():
		return inputFolder, nil
	case info.Mode().IsRegular():
		return inputFile, nil
	}
	return 0, fmt.Errorf("failed to read %s: it is neither a folder nor a regular file", path)
}

// skillFolders expands one folder argument into skill folders: the folder
// itself, or with recursive every skill folder below it. A repository that
// holds no skill gives a verdict that says so.
func skillFolders(path string, recursive bool) ([]string, *verdict) {
	if !recursive {
		return []string{path}, nil
	}
	folders, err := skill.FindFolders(path)
	if err != nil {
		v := &verdict{source: path}
		v.fail(fieldSkillMD, err.Error(), "")
		return nil, v
	}
	if len(folders) == 0 {
		v := &verdict{source: path}
		v.fail(fieldSkillMD, "no folder below holds a SKILL.md", "a skill folder holds a file named exactly SKILL.md")
		return nil, v
	}
	return folders, nil
}

// manifestFile judges every Skill of a manifest file.
func (j *judge) manifestFile(path string) []*verdict {
	skills, err := readManifestFile(path)
	if err != nil {
		v := &verdict{source: path}
		v.fail(fieldManifest, err.Error(), "")
		return []*verdict{v}
	}
	if len(skills) == 0 {
		v := &verdict{source: path}
		v.fail(fieldManifest, "the file holds no Skill",
			"a Skill manifest has `apiVersion: "+skillsv1.GroupVersion.String()+"` and `kind: Skill`")
		return []*verdict{v}
	}
	verdicts := make([]*verdict, 0, len(skills))
	for _, ms := range skills {
		if ms.object == nil {
			v := &verdict{source: ms.source}
			v.fail(fieldManifest, ms.problem, "compare the document with `kubectl explain skill.spec`")
			verdicts = append(verdicts, v)
			continue
		}
		verdicts = append(verdicts, j.object(ms.source, ms.object))
	}
	return verdicts
}

// pluralize writes a count and a noun, with an s when the count is not one.
func pluralize(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
