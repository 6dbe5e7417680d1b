package skill

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ConfigMap limits that Pack plans for.
const (
	// MaxConfigMapBytes is the most a ConfigMap holds: the sum of the sizes
	// of its keys and values (Data and BinaryData) is at most 1 MiB.
	MaxConfigMapBytes = 1 << 20
	// DefaultShardBytes is the shard size Pack uses by default: 1 MiB less
	// 64 KiB of headroom.
	DefaultShardBytes = MaxConfigMapBytes - 64<<10
	// MaxShards is the most ConfigMaps one skill is spread over.
	MaxShards = 64
	// maxKeyLength is the longest ConfigMap key.
	maxKeyLength = 253
)

// ApplySafeText tells whether data is text that a ConfigMap (or a Skill's
// content) carries unchanged through server-side apply: valid UTF-8 holding
// none of the characters that the API server, reading an apply patch as
// YAML, refuses or changes. Other bytes are stored as binary data.
func ApplySafeText(data []byte) bool {
	return utf8.Valid(data) && !bytes.ContainsFunc(data, NotApplySafe)
}

// NotApplySafe tells whether a character cannot pass through server-side
// apply in a string: YAML refuses DEL, the C1 controls and U+FFFE/U+FFFF
// when JSON leaves them unescaped, and reads U+0085 (next line) as a break.
func NotApplySafe(r rune) bool {
	return r == 0x7f || (r >= 0x80 && r <= 0x9f) || r == 0xfffe || r == 0xffff
}

// Shard is the payload of one ConfigMap of a packed skill.
type Shard struct {
	// Data holds SKILL.md, manifest.json and the bundled files that are
	// UTF-8 text.
	Data map[string]string
	// BinaryData holds the other bundled files, raw or gzip-compressed.
	BinaryData map[string][]byte
}

// Size is what the shard counts against a ConfigMap's limit: the sizes of
// every key and value.
func (s Shard) Size() int {
	n := 0
	for k, v := range s.Data {
		n += len(k) + len(v)
	}
	for k, v := range s.BinaryData {
		n += len(k) + len(v)
	}
	return n
}

// TooLargeError reports content that does not fit in ConfigMaps.
type TooLargeError struct {
	// Field is the field of the skill that is too large, such as
	// spec.files[3].content.
	Field string
	// Message says what is too large and by how much.
	Message string
}

// Error explains what is too large and how to serve it instead.
func (e *TooLargeError) Error() string {
	return e.Problem().String()
}

// Problem returns the error as a validation problem.
func (e *TooLargeError) Problem() Problem {
	return Problem{
		Field:   e.Field,
		Message: e.Message,
		Hint: "serve large bundled files from an OCI image mounted as a volume: build an image holding the " +
			"skill's files and set spec.bundle.image instead of spec.files",
	}
}

// packedFile is a bundled file encoded for a ConfigMap.
type packedFile struct {
	entry   ManifestFile
	text    string
	binary  []byte
	payload int
}

// Pack spreads a skill over ConfigMap payloads of at most maxShardBytes
// each (zero or less means DefaultShardBytes; more than MaxConfigMapBytes is
// an error). Shard 0 holds SKILL.md and manifest.json; bundled files go, in
// order, into the first shard with room. A file that does not fit in a shard
// of its own, or a skill that needs more than MaxShards shards, gives a
// *TooLargeError. Pack refuses a skill whose fields disagree with its front
// matter, since Unpack could not give it back; Validate reports why.
func Pack(s *Skill, maxShardBytes int) ([]Shard, error) {
	if maxShardBytes <= 0 {
		maxShardBytes = DefaultShardBytes
	}
	if maxShardBytes > MaxConfigMapBytes {
		return nil, fmt.Errorf("failed to pack skill %s: a shard of %d bytes exceeds the ConfigMap limit of %d",
			s.Name, maxShardBytes, MaxConfigMapBytes)
	}
	manifest := Manifest{
		Version:                   ManifestVersion,
		Name:                      s.Name,
		Hash:                      Hash(s),
		Invocation:                invocationOrDefault(s.Invocation),
		GeneratedFrontMatter:      s.FrontMatter == "",
		AddedFrontMatterLineBreak: s.FrontMatter != "" && !strings.HasSuffix(s.FrontMatter, "\n"),
		Shards:                    MaxShards,
	}
	if err := checkPackable(s, manifest); err != nil {
		return nil, fmt.Errorf("failed to pack skill %s: %w", s.Name, err)
	}
	skillMD := Render(s)
	files, err := encodeFiles(s.Files, maxShardBytes)
	if err != nil {
		return nil, err
	}
	manifest.Files = make([]ManifestFile, len(files))
	for i := range files {
		manifest.Files[i] = files[i].entry
		manifest.Files[i].Shard = MaxShards - 1
	}
	// The manifest written with the widest shard numbers bounds its final size.
	reserve := len(SkillFileName) + len(skillMD) + len(ManifestKey) + len(manifest.encode())
	if reserve > maxShardBytes {
		return nil, &TooLargeError{Field: fieldBody, Message: fmt.Sprintf(
			"SKILL.md (%d bytes) and the manifest of %d files take %d bytes, more than a ConfigMap shard holds (%d bytes)",
			len(skillMD), len(files), reserve, maxShardBytes)}
	}
	used, err := assignShards(files, reserve, maxShardBytes)
	if err != nil {
		return nil, err
	}
	manifest.Shards = len(used)
	for i := range files {
		manifest.Files[i] = files[i].entry
	}
	return buildShards(skillMD, manifest, files), nil
}

// checkPackable refuses a skill that Unpack could not give back exactly:
// unsafe or clashing file paths, or fields that disagree with SKILL.md.
func checkPackable(s *Skill, m Manifest) error {
	for i, f := range s.Files {
		if message := checkFilePath(f.Path); message != "" {
			return fmt.Errorf("spec.files[%d].path %q %s", i, f.Path, message)
		}
	}
	if problems := fileSetProblems(s.Files); len(problems) > 0 {
		return fmt.Errorf("spec.files[%d].path: %s", problems[0].index, problems[0].Message)
	}
	parsed, err := ParseSkillMD(Render(s))
	if err != nil {
		return fmt.Errorf("the rendered SKILL.md cannot be read back: %w", err)
	}
	m.restore(parsed)
	parsed.Files = s.Files
	if !sameSkill(parsed, s) {
		return fmt.Errorf("its fields disagree with its front matter; validate it to see where")
	}
	return nil
}

// encodeFiles picks a key and an encoding for each bundled file.
func encodeFiles(files []File, maxShardBytes int) ([]packedFile, error) {
	keys := fileKeys(files)
	packed := make([]packedFile, len(files))
	for i, f := range files {
		p := packedFile{entry: ManifestFile{Path: f.Path, Key: keys[i], Size: len(f.Content), Executable: f.Executable}}
		alone := len(keys[i]) + len(f.Content)
		switch {
		case ApplySafeText(f.Content) && (alone <= maxShardBytes || f.Executable):
			p.entry.Encoding, p.text, p.payload = EncodingText, string(f.Content), len(f.Content)
		case f.Executable:
			p.entry.Encoding, p.binary, p.payload = EncodingBinary, f.Content, len(f.Content)
		default:
			compressed := gzipBytes(f.Content)
			// Compressed files need unpacking before use: only worth it for a
			// tenth saved, or to fit at all.
			if len(compressed)*10 <= len(f.Content)*9 || (alone > maxShardBytes && len(compressed) < len(f.Content)) {
				p.entry.Encoding, p.binary, p.payload = EncodingGzip, compressed, len(compressed)
			} else if ApplySafeText(f.Content) {
				p.entry.Encoding, p.text, p.payload = EncodingText, string(f.Content), len(f.Content)
			} else {
				p.entry.Encoding, p.binary, p.payload = EncodingBinary, f.Content, len(f.Content)
			}
		}
		if need := len(keys[i]) + p.payload; need > maxShardBytes {
			return nil, &TooLargeError{Field: fmt.Sprintf("%s[%d].content", fieldFiles, i), Message: fmt.Sprintf(
				"%s is %d bytes (%d as stored), more than a ConfigMap shard holds (%d bytes)",
				f.Path, len(f.Content), p.payload, maxShardBytes)}
		}
		packed[i] = p
	}
	return packed, nil
}

// assignShards puts each file in the first shard with room (shard 0 starts
// with reserve bytes used) and returns the bytes used in each shard.
func assignShards(files []packedFile, reserve, maxShardBytes int) ([]int, error) {
	used := []int{reserve}
	for i := range files {
		need := len(files[i].entry.Key) + files[i].payload
		shard := 0
		for shard < len(used) && used[shard]+need > maxShardBytes {
			shard++
		}
		if shard == len(used) {
			if len(used) == MaxShards {
				return nil, &TooLargeError{Field: fieldFiles, Message: fmt.Sprintf(
					"the bundled files need more than %d ConfigMaps of %d bytes", MaxShards, maxShardBytes)}
			}
			used = append(used, 0)
		}
		used[shard] += need
		files[i].entry.Shard = shard
	}
	return used, nil
}

// buildShards lays out the shards once every file has its place.
func buildShards(skillMD []byte, manifest Manifest, files []packedFile) []Shard {
	shards := make([]Shard, manifest.Shards)
	for i := range shards {
		shards[i] = Shard{Data: map[string]string{}, BinaryData: map[string][]byte{}}
	}
	if ApplySafeText(skillMD) {
		shards[0].Data[SkillFileName] = string(skillMD)
	} else {
		shards[0].BinaryData[SkillFileName] = skillMD
	}
	shards[0].Data[ManifestKey] = string(manifest.encode())
	for _, f := range files {
		if f.entry.Encoding == EncodingText {
			shards[f.entry.Shard].Data[f.entry.Key] = f.text
		} else {
			shards[f.entry.Shard].BinaryData[f.entry.Key] = f.binary
		}
	}
	for i := range shards {
		if len(shards[i].BinaryData) == 0 {
			shards[i].BinaryData = nil
		}
		if len(shards[i].Data) == 0 {
			shards[i].Data = nil
		}
	}
	return shards
}

// fileKeys gives each file a ConfigMap key readable as its path: slashes
// become underscores, other characters a ConfigMap key cannot hold become
// hyphens, a leading dot gets an underscore before it, and a number is added
// before the extension when two paths would share a key.
func fileKeys(files []File) []string {
	used := map[string]bool{SkillFileName: true, ManifestKey: true}
	keys := make([]string, len(files))
	for i, f := range files {
		base := readableKey(f.Path)
		key := base
		for n := 2; used[key]; n++ {
			ext := path.Ext(base)
			if ext == base {
				ext = ""
			}
			key = strings.TrimSuffix(base, ext) + "-" + strconv.Itoa(n) + ext
		}
		used[key] = true
		keys[i] = key
	}
	return keys
}

func readableKey(p string) string {
	var b strings.Builder
	for _, r := range p {
		switch {
		case r == '/':
			b.WriteByte('_')
		case isKeyChar(r):
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	key := b.String()
	if strings.HasPrefix(key, ".") {
		key = "_" + key
	}
	if len(key) > maxKeyLength-16 {
		sum := sha256.Sum256([]byte(p))
		key = key[:maxKeyLength-32] + "-" + hex.EncodeToString(sum[:4])
	}
	return key
}

func isKeyChar(r rune) bool {
	return r == '-' || r == '.' || r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
}

// isConfigMapKey tells whether key is a valid ConfigMap key that names a
// single file in a mounted volume.
func isConfigMapKey(key string) bool {
	if key == "" || len(key) > maxKeyLength || key == "." || strings.HasPrefix(key, "..") {
		return false
	}
	for _, r := range key {
		if !isKeyChar(r) {
			return false
		}
	}
	return true
}

func gzipBytes(content []byte) []byte {
	var b bytes.Buffer
	w, _ := gzip.NewWriterLevel(&b, gzip.DefaultCompression)
	_, _ = w.Write(content)
	_ = w.Close()
	return b.Bytes()
}
