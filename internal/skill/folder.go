package skill

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"
)

// FindFolders lists the skill folders of a repository: root itself
// when it holds a SKILL.md, else every folder below root that holds one,
// in lexical order. It does not look inside a skill folder (its own files
// are the skill's), nor inside `.git` folders, nor through links to folders.
func FindFolders(root string) ([]string, error) {
	var folders []string
	err := filepath.WalkDir(root, func(path string, entry fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("failed to read folder %s: %w", path, err)
		}
		if !entry.IsDir() {
			return nil
		}
		if entry.Name() == ".git" && path != root {
			return filepath.SkipDir
		}
		if _, err := os.Lstat(filepath.Join(path, SkillFileName)); err == nil {
			folders = append(folders, path)
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return folders, nil
}

// ParseDir reads a skill folder: its SKILL.md (ParseSkillMD) and every other
// regular file below it, recording executable bits. Files are sorted by path.
// Every `.git` entry, folder, file or link, at any depth, is left out (see
// ParseFolder). A symbolic link is read as the file it points to when that
// file is inside the folder; a link that leads outside the folder, a broken
// link, a link to a folder and any special file (socket, device, pipe) are
// errors that name the path.
func ParseDir(dir string) (*Skill, error) {
	s, _, err := ParseFolder(dir)
	return s, err
}

// ParseFolder is ParseDir that also returns the paths, relative to the
// folder, of the `.git` entries it left out. A skill folder is often a git
// checkout, whose `.git` is the checkout's, not the skill's; and git
// metadata is never bundled, since git runs the commands its config and
// hooks name.
func ParseFolder(dir string) (s *Skill, skipped []string, err error) {
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to open skill folder %s: %w", dir, err)
	}
	root, err := os.OpenRoot(realDir)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to open skill folder %s: %w", dir, err)
	}
	defer func() { _ = root.Close() }()

	walker := folderWalker{dir: dir, realDir: realDir, root: root}
	skillName := SkillFileName
	if info, err := root.Lstat(SkillFileName); err == nil && info.Mode()&fs.ModeSymlink != 0 {
		if skillName, err = walker.resolveLink(SkillFileName, filepath.Join(dir, SkillFileName)); err != nil {
			return nil, nil, err
		}
	}
	data, err := root.ReadFile(skillName)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to read %s in %s (a skill folder holds a file named exactly SKILL.md): %w",
			SkillFileName, dir, err)
	}
	if s, err = ParseSkillMD(data); err != nil {
		return nil, nil, fmt.Errorf("failed to parse %s: %w", filepath.Join(dir, SkillFileName), err)
	}
	if err := fs.WalkDir(root.FS(), ".", walker.visit); err != nil {
		return nil, nil, err
	}
	sort.Slice(walker.files, func(i, j int) bool { return walker.files[i].Path < walker.files[j].Path })
	s.Files = walker.files
	return s, walker.skipped, nil
}

// folderWalker collects the bundled files of a skill folder.
type folderWalker struct {
	dir     string
	realDir string
	root    *os.Root
	files   []File
	skipped []string
}

// visit reads one entry of the folder.
func (w *folderWalker) visit(name string, entry fs.DirEntry, err error) error {
	if err != nil {
		return fmt.Errorf("failed to read %s: %w", filepath.Join(w.dir, filepath.FromSlash(name)), err)
	}
	switch {
	case name == ".":
		return nil
	case entry.Name() == GitDir:
		w.skipped = append(w.skipped, name)
		if entry.IsDir() {
			return fs.SkipDir
		}
		return nil
	case entry.IsDir():
		return nil
	case name == SkillFileName:
		return nil
	}
	full := filepath.Join(w.dir, filepath.FromSlash(name))
	readName := name
	if entry.Type()&fs.ModeSymlink != 0 {
		target, err := w.resolveLink(name, full)
		if err != nil {
			return err
		}
		readName = target
	}
	info, err := w.root.Stat(readName)
	if err != nil {
		return fmt.Errorf("failed to read file %s: %w", full, err)
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("failed to read file %s: it is a %s, not a regular file; remove it from the skill folder",
			full, modeName(info.Mode()))
	}
	content, err := w.root.ReadFile(readName)
	if err != nil {
		return fmt.Errorf("failed to read file %s: %w", full, err)
	}
	w.files = append(w.files, File{Path: name, Content: content, Executable: info.Mode()&0o111 != 0})
	return nil
}

// resolveLink returns the path, relative to the folder, of the regular file a
// symbolic link leads to, refusing links that leave the folder.
func (w *folderWalker) resolveLink(name, full string) (string, error) {
	target, _ := os.Readlink(full)
	resolved, err := filepath.EvalSymlinks(filepath.Join(w.realDir, filepath.FromSlash(name)))
	if err != nil {
		return "", fmt.Errorf("failed to read file %s: it is a broken symbolic link to %q; remove it or copy the file into the skill folder",
			full, target)
	}
	rel, err := filepath.Rel(w.realDir, resolved)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", fmt.Errorf("failed to read file %s: it is a symbolic link to %q, outside the skill folder; "+
			"copy the file into the folder instead of linking to it", full, target)
	}
	info, err := os.Stat(resolved)
	if err != nil {
		return "", fmt.Errorf("failed to read file %s: %w", full, err)
	}
	if info.IsDir() {
		return "", fmt.Errorf("failed to read file %s: it is a symbolic link to the folder %q; "+
			"links to folders are not followed, copy the folder instead", full, target)
	}
	return filepath.ToSlash(rel), nil
}

func modeName(mode fs.FileMode) string {
	switch {
	case mode&fs.ModeNamedPipe != 0:
		return "named pipe"
	case mode&fs.ModeSocket != 0:
		return "socket"
	case mode&fs.ModeDevice != 0:
		return "device"
	case mode.IsDir():
		return "folder"
	}
	return "special file"
}

// WriteDir writes a skill folder into dir, creating it when needed: SKILL.md
// (Render) and every bundled file, with mode 0755 for executable files and
// 0644 for the others. Every write stays inside dir: a file path that is not
// a clean relative path, or a symbolic link already in dir that leads out of
// it, is an error.
func WriteDir(s *Skill, dir string) error {
	for i, f := range s.Files {
		if problem := checkFilePath(f.Path); problem != "" {
			return fmt.Errorf("failed to write file %q (spec.files[%d].path): %s", f.Path, i, problem)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("failed to create skill folder %s: %w", dir, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("failed to open skill folder %s: %w", dir, err)
	}
	defer func() { _ = root.Close() }()
	if err := writeFile(root, SkillFileName, Render(s), false); err != nil {
		return fmt.Errorf("failed to write %s in %s: %w", SkillFileName, dir, err)
	}
	for _, f := range s.Files {
		if parent := path.Dir(f.Path); parent != "." {
			if err := root.MkdirAll(parent, 0o755); err != nil {
				return fmt.Errorf("failed to create folder %s in %s: %w", parent, dir, err)
			}
		}
		if err := writeFile(root, f.Path, f.Content, f.Executable); err != nil {
			return fmt.Errorf("failed to write file %s in %s: %w", f.Path, dir, err)
		}
	}
	return nil
}

// writeFile writes one file under root and sets its mode, also when the file
// already existed with another mode.
func writeFile(root *os.Root, name string, content []byte, executable bool) error {
	mode := os.FileMode(0o644)
	if executable {
		mode = 0o755
	}
	if err := root.WriteFile(name, content, mode); err != nil {
		return err
	}
	return root.Chmod(name, mode)
}

// maxPathLength bounds a bundled file's path, as the Skill API does.
const maxPathLength = 1024

// checkFilePath returns "" when p may name a bundled file, else what is wrong
// with it. A valid path is relative, clean, uses forward slashes, has no `..`
// segment and is not SKILL.md.
func checkFilePath(p string) string {
	message, _ := filePathProblem(p)
	return message
}

// filePathProblem returns what is wrong with a bundled file's path and how to
// fix it, or two empty strings.
func filePathProblem(p string) (message, hint string) {
	const relHint = "use a relative path with forward slashes, such as scripts/check.sh"
	switch {
	case p == "":
		return "is empty", relHint
	case p == ".":
		return "names the skill folder itself", relHint
	case len(p) > maxPathLength:
		return fmt.Sprintf("is %d bytes long, more than %d", len(p), maxPathLength), "use a shorter path"
	case !utf8.ValidString(p):
		return "is not valid UTF-8", "rename the file with UTF-8 characters"
	case strings.ContainsFunc(p, isControl):
		return "contains a control character", "rename the file without control characters or line breaks"
	case strings.Contains(p, `\`):
		return "contains a backslash", relHint
	case strings.HasPrefix(p, "/"):
		return "is absolute", relHint
	case hasDotDotSegment(p):
		return "has a '..' segment that leaves the skill folder", "keep every bundled file inside the skill folder"
	case hasGitSegment(p):
		return "has a '.git' segment: git metadata is never bundled, since git runs the commands its config and hooks name",
			"remove the file; .gitignore and .gitattributes are fine"
	case path.Clean(p) != p:
		return fmt.Sprintf("is not clean (it should read %q)", path.Clean(p)),
			"remove './' segments, doubled and trailing slashes"
	case p == SkillFileName:
		return "is SKILL.md, which is written from the front matter and instructions",
			"put the front matter in spec.frontMatter or the fields and the body in spec.instructions"
	}
	return "", ""
}

func isControl(r rune) bool {
	return r < 0x20 || r == 0x7f
}

// hasGitSegment tells whether a path has a `.git` segment, in any case:
// git reads its config and hooks from there (and case-insensitive file
// systems treat `.GIT` as `.git`), so a skill that ships one would run its
// author's commands inside every sandbox that calls git in /skill.
func hasGitSegment(p string) bool {
	for _, segment := range strings.Split(p, "/") {
		if strings.EqualFold(segment, GitDir) {
			return true
		}
	}
	return false
}

func hasDotDotSegment(p string) bool {
	for _, segment := range strings.Split(p, "/") {
		if segment == ".." {
			return true
		}
	}
	return false
}

// fileSetProblems reports valid paths that appear twice, and a file whose
// path is a folder of another file (`docs` and `docs/a.md`), which cannot
// both be written. Problems are keyed by file index.
func fileSetProblems(files []File) []indexedProblem {
	var problems []indexedProblem
	first := make(map[string]int, len(files))
	for i, f := range files {
		if checkFilePath(f.Path) != "" {
			continue
		}
		if j, dup := first[f.Path]; dup {
			problems = append(problems, indexedProblem{index: i, Problem: Problem{
				Message: fmt.Sprintf("%q is also the path of spec.files[%d]", f.Path, j),
				Hint:    "keep one file per path",
			}})
			continue
		}
		first[f.Path] = i
	}
	for i, f := range files {
		if checkFilePath(f.Path) != "" {
			continue
		}
		for dir := path.Dir(f.Path); dir != "."; dir = path.Dir(dir) {
			if j, clash := first[dir]; clash {
				problems = append(problems, indexedProblem{index: j, Problem: Problem{
					Message: fmt.Sprintf("%q is a file, but spec.files[%d] (%q) needs it to be a folder", dir, i, f.Path),
					Hint:    "rename one of the two files",
				}})
				break
			}
		}
	}
	return problems
}

// bareRepositoryProblems reports folders that git would take for a bare
// repository: a HEAD file beside objects/ and refs/ folders. Run inside
// such a folder, git reads the config file next to them and runs the
// commands it names (core.fsmonitor, hooks) exactly as it would from a
// `.git` folder. The problem is keyed by the HEAD file's index.
func bareRepositoryProblems(files []File) []indexedProblem {
	heads := map[string]int{}
	objects, refs := map[string]bool{}, map[string]bool{}
	for i, f := range files {
		if checkFilePath(f.Path) != "" {
			continue
		}
		dir, base := path.Split(f.Path)
		if base == "HEAD" {
			heads[dir] = i
		}
		for d := path.Dir(f.Path); d != "."; d = path.Dir(d) {
			parent, name := path.Split(d)
			switch name {
			case "objects":
				objects[parent] = true
			case "refs":
				refs[parent] = true
			}
		}
	}
	var problems []indexedProblem
	for dir, i := range heads {
		if !objects[dir] || !refs[dir] {
			continue
		}
		where := "the skill folder"
		if dir != "" {
			where = strings.TrimSuffix(dir, "/")
		}
		problems = append(problems, indexedProblem{index: i, Problem: Problem{
			Message: fmt.Sprintf("%q, with files under %sobjects/ and %srefs/, makes %s a bare git repository: "+
				"git run there reads its config and runs the commands it names", files[i].Path, dir, dir, where),
			Hint: "remove the git metadata from the skill",
		}})
	}
	sort.Slice(problems, func(a, b int) bool { return problems[a].index < problems[b].index })
	return problems
}

// indexedProblem is a problem with a bundled file, by index.
type indexedProblem struct {
	index int
	Problem
}
