package skillrepo_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeskills/kubeskills/internal/skillrepo"
)

// entry is a tarball entry: a file, a folder (name ends in /) or a link.
type entry struct{ name, body, link string }

func tarball(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body)), Typeflag: tar.TypeReg}
		switch {
		case e.link != "":
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, e.link, 0
		case strings.HasSuffix(e.name, "/"):
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// serve serves body at /artifact.tar.gz and returns its URL and digest.
func serve(t *testing.T, body []byte) (url, digest string) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/artifact.tar.gz" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/artifact.tar.gz", fmt.Sprintf("sha256:%x", sha256.Sum256(body))
}

func skillMD(name string) string {
	return "---\nname: " + name + "\ndescription: Does " + name + ".\n---\n\n# " + name + "\n"
}

func TestFetchAndRead(t *testing.T) {
	url, digest := serve(t, tarball(t,
		entry{name: "README.md", body: "# Skills\n"},
		entry{name: "skills/"},
		entry{name: "skills/dns-debug/SKILL.md", body: skillMD("dns-debug")},
		entry{name: "skills/dns-debug/scripts/resolve.sh", body: "nslookup \"$1\"\n"},
		entry{name: "skills/team/rollout-check/SKILL.md", body: skillMD("rollout-check")},
		entry{name: "skills/broken/SKILL.md", body: "no front matter\n"},
	))
	tmp := t.TempDir()
	files, cleanup, err := skillrepo.Fetch(context.Background(), url, digest, tmp, skillrepo.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	folders, err := skillrepo.Read(files, "skills")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range folders {
		switch {
		case f.Err != nil:
			got = append(got, f.Path+": "+f.Err.Error())
		default:
			got = append(got, fmt.Sprintf("%s: %s, %d files", f.Path, f.Skill.Name, len(f.Skill.Files)))
		}
	}
	want := []string{
		"broken: failed to parse broken/SKILL.md",
		"dns-debug: dns-debug, 1 files",
		"team/rollout-check: rollout-check, 0 files",
	}
	if len(got) != len(want) {
		t.Fatalf("folders %q, want %q", got, want)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("folder %d: %q, want it to start with %q", i, got[i], want[i])
		}
		if strings.Contains(got[i], tmp) {
			t.Errorf("folder %d names where the artifact was unpacked: %q", i, got[i])
		}
	}
	if _, err := skillrepo.Read(files, "missing"); err == nil || err.Error() != `the artifact has no folder "missing"` {
		t.Errorf("Read of a missing path: %v", err)
	}
	cleanup()
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("cleanup left %v in %s", left, tmp)
	}
}

// TestFetchRefuses: an artifact that cannot be trusted is refused whole,
// and nothing of it is left for Read.
func TestFetchRefuses(t *testing.T) {
	good := tarball(t, entry{name: "dns-debug/SKILL.md", body: skillMD("dns-debug")})
	for _, tc := range []struct {
		name   string
		body   []byte
		digest string
		limits skillrepo.Limits
		want   string
	}{{
		name: "digest mismatch", body: good, digest: fmt.Sprintf("sha256:%x", sha256.Sum256([]byte("other"))),
		want: "computed digest doesn't match",
	}, {
		name: "no digest", body: good, digest: "-",
		want: "failed to verify archive",
	}, {
		name: "path out of the artifact", body: tarball(t, entry{name: "../escape/SKILL.md", body: skillMD("escape")}),
		want: "failed to unpack the artifact",
	}, {
		name: "link", body: tarball(t, entry{name: "dns-debug/SKILL.md", link: "/etc/passwd"}),
		want: "is a symlink, which is not allowed",
	}, {
		name: "larger than the download bound", body: good, limits: skillrepo.Limits{MaxArtifactBytes: 16},
		want: "greater than the max download size of 16 bytes",
	}, {
		name: "unpacks past the bound", body: tarball(t, entry{name: "big/file", body: strings.Repeat("x", 4096)}),
		limits: skillrepo.Limits{MaxUnpackedBytes: 1024}, want: "at most 1024 bytes are unpacked",
	}, {
		name: "not a tarball", body: []byte("<html>login</html>"),
		want: "requires gzip-compressed body",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			url, digest := serve(t, tc.body)
			switch tc.digest {
			case "":
			case "-":
				digest = ""
			default:
				digest = tc.digest
			}
			tmp := t.TempDir()
			files, cleanup, err := skillrepo.Fetch(context.Background(), url, digest, tmp, tc.limits)
			defer cleanup()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Fetch: %v, want an error holding %q", err, tc.want)
			}
			if files != "" {
				t.Errorf("Fetch returned files %q with its error", files)
			}
			if _, err := os.Stat(filepath.Join(tmp, "..", "escape")); err == nil {
				t.Errorf("a path out of the artifact was written")
			}
		})
	}
	t.Run("not found", func(t *testing.T) {
		url, digest := serve(t, good)
		_, cleanup, err := skillrepo.Fetch(context.Background(), url+".old", digest, t.TempDir(), skillrepo.Limits{})
		defer cleanup()
		if err == nil || !strings.Contains(err.Error(), "serves no artifact at "+url+".old (404)") {
			t.Fatalf("Fetch: %v", err)
		}
	})
}
