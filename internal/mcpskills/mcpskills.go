// Package mcpskills is the wire format of the MCP Skills extension,
// io.modelcontextprotocol/skills (SEP-2640, final, against base protocol
// revision 2026-07-28): the skills/list and skills/get methods, the Skill
// entry with its verbatim front matter and its manifest of files, and the
// skill:// URIs the files are read at with resources/read.
//
// It knows nothing of Kubernetes: the agent runtime builds entries from its
// catalog, and clients and tests decode them with the same types.
package mcpskills

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"sigs.k8s.io/yaml"

	"github.com/kubeskills/kubeskills/internal/skill"
)

// The extension's names.
const (
	// ExtensionID is the key of the extension in the server's capabilities.
	ExtensionID = "io.modelcontextprotocol/skills"
	// MethodList enumerates the skills a server serves.
	MethodList = "skills/list"
	// MethodGet returns the entry of one skill, named by its SKILL.md URI.
	MethodGet = "skills/get"
	// Scheme is the URI scheme skill files are served under.
	Scheme = "skill"
	// ResultComplete is the resultType of every result of the extension.
	ResultComplete = "complete"
	// Dynamic is the resources value of a skill whose files cannot be
	// listed with stable digests.
	Dynamic = "dynamic"
)

// Limits every conforming host accepts; a server should not serve more.
const (
	// MaxResources bounds the entries of one skill's resources.
	MaxResources = 512
	// MaxTotalBytes bounds the sum of the sizes of one skill's resources.
	MaxTotalBytes = 16 << 20
)

// SkillResource is one file of a skill, with the digest and size of its
// bytes.
type SkillResource struct {
	// URI is the file's resource URI.
	URI string `json:"uri"`
	// Digest is "sha256:" and 64 lowercase hex digits of the file's bytes.
	Digest string `json:"digest"`
	// Size is the number of bytes the digest covers.
	Size int `json:"size"`
}

// Resources are a skill's files: every one of them, or Dynamic when they
// cannot be listed with stable digests.
type Resources struct {
	Files   []SkillResource
	Dynamic bool
}

// MarshalJSON writes an array of files, or the string "dynamic".
func (r Resources) MarshalJSON() ([]byte, error) {
	if r.Dynamic {
		return json.Marshal(Dynamic)
	}
	if r.Files == nil {
		return []byte("[]"), nil
	}
	return json.Marshal(r.Files)
}

// UnmarshalJSON reads an array of files or the string "dynamic"; anything
// else makes the entry invalid, as the specification says.
func (r *Resources) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err == nil {
		if s != Dynamic {
			return fmt.Errorf("resources is the string %q, not an array or %q", s, Dynamic)
		}
		*r = Resources{Dynamic: true}
		return nil
	}
	var files []SkillResource
	if err := json.Unmarshal(data, &files); err != nil || files == nil {
		return fmt.Errorf("resources is neither an array of files nor %q", Dynamic)
	}
	*r = Resources{Files: files}
	return nil
}

// Skill is the entry of one skill, the same in skills/list and skills/get.
type Skill struct {
	// URI is the URI of the skill's SKILL.md.
	URI string `json:"uri"`
	// Frontmatter is SKILL.md's front matter, verbatim, as a JSON object.
	Frontmatter map[string]any `json:"frontmatter"`
	// Resources are the skill's files, SKILL.md first.
	Resources Resources `json:"resources"`
	// Meta carries what the server adds, under its own prefix.
	Meta map[string]any `json:"_meta,omitempty"`
}

// ListParams are the params of skills/list.
type ListParams struct {
	mcp.ParamsBase
	Cursor string `json:"cursor,omitempty"`
}

// ListResult is the result of skills/list.
type ListResult struct {
	mcp.ResultBase
	ResultType string  `json:"resultType"`
	Skills     []Skill `json:"skills"`
	NextCursor string  `json:"nextCursor,omitempty"`
	mcp.Cacheable
}

// GetParams are the params of skills/get.
type GetParams struct {
	mcp.ParamsBase
	URI string `json:"uri"`
}

// GetResult is the result of skills/get.
type GetResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
	Skill      Skill  `json:"skill"`
	mcp.Cacheable
}

// URI returns the resource URI of a file of a skill: skill://NAME/PATH.
// The skill's name is the URI's only path segment before the file's path,
// so the name is the authority.
func URI(name, path string) string { return Scheme + "://" + name + "/" + path }

// SkillURI returns the URI of a skill's SKILL.md.
func SkillURI(name string) string { return URI(name, skill.SkillFileName) }

// ParseURI splits a skill:// URI into the skill's name and the file's
// path. The path must be clean and relative (fs.ValidPath): no `.` or `..`
// segments, no empty ones, no escapes.
func ParseURI(uri string) (name, path string, err error) {
	rest, ok := strings.CutPrefix(uri, Scheme+"://")
	if !ok {
		return "", "", fmt.Errorf("%s is not a %s:// URI", uri, Scheme)
	}
	name, path, ok = strings.Cut(rest, "/")
	if !ok || name == "" || path == "" || !fs.ValidPath(path) || strings.ContainsAny(rest, "?#%\\") {
		return "", "", fmt.Errorf("%s is not %s://SKILL/PATH with a clean relative PATH", uri, Scheme)
	}
	return name, path, nil
}

// Digest returns the digest of a file's bytes as the extension writes it.
func Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// FileResource is the manifest entry of one file of a skill.
func FileResource(name, path string, data []byte) SkillResource {
	return SkillResource{URI: URI(name, path), Digest: Digest(data), Size: len(data)}
}

// FolderResources is what an entry lists for the skill folder dir, served
// as the skill name: each file's URI, digest and size, by URI. A host
// compares it with an entry to check that a served skill is the folder.
func FolderResources(dir, name string) (map[string]SkillResource, error) {
	resources := map[string]SkillResource{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		r := FileResource(name, filepath.ToSlash(rel), data)
		resources[r.URI] = r
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("failed to read the skill folder %s: %w", dir, err)
	}
	return resources, nil
}

// Frontmatter returns the front matter of a SKILL.md as a JSON object,
// every key the author wrote, with its value unchanged.
func Frontmatter(skillMD []byte) (map[string]any, error) {
	s, err := skill.ParseSkillMD(skillMD)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	if err := yaml.Unmarshal([]byte(s.FrontMatter), &out); err != nil {
		return nil, fmt.Errorf("failed to read the front matter: %w", err)
	}
	if _, ok := out["name"].(string); !ok {
		return nil, errors.New("the front matter has no name")
	}
	if _, ok := out["description"].(string); !ok {
		return nil, errors.New("the front matter has no description")
	}
	return out, nil
}
