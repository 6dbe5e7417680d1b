package skillapi

import (
	"fmt"
	"sort"
	"strings"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/skill"
)

// A skill source is a ConfigMap labelled skillsv1.LabelSkillSource that
// holds a skill folder, as kustomize's configMapGenerator writes one from
// plain files: the key SKILL.md, and one key per bundled file. A ConfigMap
// key cannot hold a slash, so a file in a subfolder is written with each
// slash as SourcePathSeparator: `scripts/check.sh` is the key
// `scripts--check.sh`. Text files are in data, other files in binaryData.
//
// The operator's own ConfigMaps (skill.Pack) name files `scripts_check.sh`
// and list the paths in manifest.json; a source has no manifest, so its keys
// must say the paths themselves, and an underscore, common in file names,
// cannot stand for a slash.

// SourcePathSeparator stands for '/' in the keys of a skill source.
const SourcePathSeparator = "--"

// SourceKey is the key of a skill source that holds the file at path.
func SourceKey(path string) string {
	return strings.ReplaceAll(path, "/", SourcePathSeparator)
}

// SourcePath is the path of the file a key of a skill source holds.
func SourcePath(key string) string {
	return strings.ReplaceAll(key, SourcePathSeparator, "/")
}

// sourceExecutable tells whether a file of a skill source is executable:
// a ConfigMap keeps no file modes, so files under scripts/ are, as in the
// agent chart, and so is any file that starts with "#!".
func sourceExecutable(path string, content []byte) bool {
	return strings.HasPrefix(path, "scripts/") || strings.HasPrefix(string(content), "#!")
}

// FromSource returns the Skill, named name in namespace, that a skill
// source's data and binaryData hold: SKILL.md parsed by skill.ParseSkillMD,
// every other key a bundled file at SourcePath(key), executable under
// scripts/ or with a "#!" line. Large files are compressed (Fit) so the
// object fits the API server. An error says why the source holds no Skill
// at all: no SKILL.md, one that cannot be parsed, too much content. What a
// Skill can hold but the operator does not serve (a name that differs from
// the front matter, an empty body, ...) is left to the Skill's own
// validation, which reports it in the Skill's status.
func FromSource(name, namespace string, data map[string]string, binaryData map[string][]byte) (*skillsv1.Skill, error) {
	var text []byte
	switch md, inData := data[skill.SkillFileName]; {
	case inData:
		text = []byte(md)
	case binaryData[skill.SkillFileName] != nil:
		text = binaryData[skill.SkillFileName]
	default:
		return nil, fmt.Errorf("it has no %s key: add the skill's %s to the configMapGenerator's files",
			skill.SkillFileName, skill.SkillFileName)
	}
	s, err := skill.ParseSkillMD(text)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", skill.SkillFileName, err)
	}
	// The API server keeps a key out of one map when it is in the other.
	for key, content := range data {
		if key != skill.SkillFileName {
			s.Files = append(s.Files, sourceFile(key, []byte(content)))
		}
	}
	for key, content := range binaryData {
		if key != skill.SkillFileName {
			s.Files = append(s.Files, sourceFile(key, content))
		}
	}
	sort.Slice(s.Files, func(i, j int) bool { return s.Files[i].Path < s.Files[j].Path })
	obj := ToObject(s, namespace)
	obj.Name = name
	fits, err := Fit(obj, MaxObjectBytes)
	if err != nil {
		return nil, err
	}
	if !fits {
		size, _ := ObjectBytes(obj)
		return nil, fmt.Errorf("the skill takes %d bytes as a Skill even compressed, more than the %d an API object holds: "+
			"serve large files from an OCI image (spec.bundle.image)", size, MaxObjectBytes)
	}
	return obj, nil
}

// sourceFile is the bundled file a key of a skill source holds.
func sourceFile(key string, content []byte) skill.File {
	p := SourcePath(key)
	return skill.File{Path: p, Content: content, Executable: sourceExecutable(p, content)}
}
