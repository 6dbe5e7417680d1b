package skillapi

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"sort"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
)

const (
	// MaxObjectBytes is the largest Skill, measured as its JSON
	// (encoding/json, which writes '<', '>' and '&' as six bytes, as the API
	// server stores them), that the API server reliably stores.
	//
	// etcd refuses a write larger than its --max-request-bytes, 1.5 MiB
	// (1,572,864 bytes) by default. Against a real kube-apiserver and etcd, a
	// Skill of 1,571,524 bytes was stored and one of 1,572,989 refused,
	// created or server-side applied alike. The server adds managedFields,
	// about a hundred bytes per bundled file, so the limit keeps 72,864 bytes
	// of headroom: enough for the 512 files a Skill may bundle.
	MaxObjectBytes = 1_500_000
	// MaxDecompressedBytes bounds what the compressed files of one skill may
	// expand to, so a small object cannot exhaust the operator's memory.
	MaxDecompressedBytes = 64 << 20
)

// ObjectBytes is the size of a Skill as JSON, what the API server stores.
func ObjectBytes(obj *skillsv1.Skill) (int, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return 0, fmt.Errorf("failed to encode skill %s: %w", obj.Name, err)
	}
	return len(data), nil
}

// Fit compresses the Skill's largest files with gzip, one at a time, until
// the object is at most limit bytes as JSON or no file gains from it. It
// reports whether the object fits.
func Fit(obj *skillsv1.Skill, limit int) (bool, error) {
	size, err := ObjectBytes(obj)
	if err != nil || size <= limit {
		return err == nil, err
	}
	files := obj.Spec.Files
	order := make([]int, len(files))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return fileBytes(files[order[a]]) > fileBytes(files[order[b]]) })
	for _, i := range order {
		if files[i].Compression != "" {
			continue
		}
		raw := []byte(ptrString(files[i].Content))
		if files[i].Content == nil {
			raw = files[i].BinaryContent
		}
		packed, err := gzipBytes(raw)
		if err != nil {
			return false, err
		}
		// Base64 makes the compressed bytes a third larger again.
		if len(packed)*4/3 >= fileBytes(files[i]) {
			continue
		}
		files[i] = skillsv1.SkillFile{Path: files[i].Path, Executable: files[i].Executable, BinaryContent: packed, Compression: skillsv1.CompressionGzip}
		if size, err = ObjectBytes(obj); err != nil || size <= limit {
			return err == nil, err
		}
	}
	return false, nil
}

// gunzip decompresses data, reading at most limit bytes of output.
func gunzip(data []byte, limit int64) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	out, err := io.ReadAll(io.LimitReader(zr, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(out)) > limit {
		return nil, fmt.Errorf("it expands to more than %d bytes", limit)
	}
	return out, nil
}

func gzipBytes(data []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(data); err != nil {
		return nil, fmt.Errorf("failed to compress: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("failed to compress: %w", err)
	}
	return buf.Bytes(), nil
}

// fileBytes is a file's size as stored in the object (content, or
// base64 binary content).
func fileBytes(f skillsv1.SkillFile) int {
	if f.Content != nil {
		return len(*f.Content)
	}
	return (len(f.BinaryContent) + 2) / 3 * 4
}

func ptrString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
