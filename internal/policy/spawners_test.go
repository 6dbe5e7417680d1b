package policy_test

import (
	"slices"
	"testing"

	"github.com/kubeskills/kubeskills/internal/policy"
)

func TestSpawners(t *testing.T) {
	tests := []struct {
		command string
		want    []string
	}{
		{"cat x | grep y", nil},
		{"awk 'BEGIN{system(\"touch /tmp/p\")}'", []string{"awk"}},
		{"awk '{print}' x | awk '{print $1}' | gawk 1", []string{"awk", "gawk"}},
		{"sed -n '1e touch /tmp/p' x", []string{"sed"}},
		{"sed 's/a/touch/e' x", []string{"sed"}},
		{"sed -e 's/a/b/g' -e 1d x", nil},
		{"sed -n '/error/p' x", nil},
		{"sed 's/error/e/g;s|x|y|' x", nil},
		{"sed -f script.sed x", []string{"sed"}},
		{"sed \"$s\" x", []string{"sed"}},
		{"sed --sandbox 's/a/b/e' x", nil},
		{"sed '$a end; e touch' x", nil},
		{"sed ':a;e touch' x", []string{"sed"}},
		{"sed 's/a/b/w out' x", nil},
		{"sed -ne 's/a/b/pe' x", []string{"sed"}},
		{"GIT_EXTERNAL_DIFF=x git diff", []string{"git"}},
		{"make -n", []string{"make"}},
		{"tar -tf a.tar --zstd", []string{"tar"}},
		{"tar --checkpoint-action=exec=touch -cf a.tar x", []string{"tar"}},
		{"tar -cf a.tar x", nil},
		{"tar -czf a.tgz x", []string{"tar"}},
		{"tar xf a.tar", []string{"tar"}},
		{"tar -I zstd -cf a.tar x", []string{"tar"}},
		{"find . -name x -exec awk 1 {} +", []string{"find", "awk"}},
		{"find . -name x", nil},
		{"xargs -n1 sed 1e", []string{"xargs", "sed"}},
		{"env FOO=1 python3 x.py", []string{"env", "python3"}},
		{"timeout 5 ls", []string{"timeout"}},
		{"sh -c 'awk 1 x; sort x'", []string{"sh", "awk"}},
		{"echo $(perl -e 1)", []string{"perl"}},
		{"less x; man ls", []string{"less", "man"}},
		{"/usr/bin/awk 1 x; awk 2 x", []string{"awk"}},
		{"sort --compress-program=gzip x", []string{"sort"}},
		{"sort -u x", nil},
		{"kubectl get pods", nil},
		{"kubectl edit deploy/web", []string{"kubectl"}},
		{"kubectl diff -f x.yaml", []string{"kubectl"}},
		{"kubectl -n x foo", []string{"kubectl"}},
		{"kubectl create --edit -f x", []string{"kubectl"}},
		{"eval 'awk 1'", []string{"awk"}},
		{"npm ci", []string{"npm"}},
		{"", nil},
	}
	for _, tt := range tests {
		if got := policy.Spawners(tt.command); !slices.Equal(got, tt.want) {
			t.Errorf("Spawners(%q) = %q, want %q", tt.command, got, tt.want)
		}
	}
}

func FuzzSpawners(f *testing.F) {
	for _, s := range []string{"sed 's/a/b/e'", "tar -tf x", "sed '/x/,+2{s/a/b/;e}'", "find . -exec sh -c 'awk 1' \\;"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, command string) {
		got := policy.Spawners(command)
		for i, n := range got {
			if n == "" || slices.Contains(got[:i], n) {
				t.Fatalf("Spawners(%q) = %q: empty or repeated name", command, got)
			}
		}
	})
}
