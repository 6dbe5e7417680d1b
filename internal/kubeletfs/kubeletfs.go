// Package kubeletfs lays out files the way the kubelet mounts ConfigMap
// volumes: for tests of code that reads such mounts (the skill bundle
// reader, the catalog store, the runner's unpack-skill), and for the local
// demo, which runs the agent runtime without a kubelet.
package kubeletfs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// DataLink is the link the kubelet swaps atomically on each update.
const DataLink = "..data"

// Write writes keys into dir exactly as the kubelet updates a
// ConfigMap volume: a new timestamped folder holding the keys, a `..data_tmp`
// link pointing at it renamed over `..data`, a link `key -> ..data/key` at
// the top for each key, links of keys gone removed, and the previous
// timestamped folder deleted.
func Write(dir string, keys map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	previous, _ := os.Readlink(filepath.Join(dir, DataLink))
	payload, err := os.MkdirTemp(dir, "..2026_01_02_03_04_05.")
	if err != nil {
		return err
	}
	for key, content := range keys {
		if err := os.WriteFile(filepath.Join(payload, key), content, 0o644); err != nil {
			return err
		}
	}
	if err := os.Chmod(payload, 0o755); err != nil {
		return err
	}
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(payload), tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, DataLink)); err != nil {
		return err
	}
	for key := range keys {
		link := filepath.Join(dir, key)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join(DataLink, key), link); err != nil {
			return err
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if _, ok := keys[e.Name()]; !ok && !strings.HasPrefix(e.Name(), "..") {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	if previous != "" {
		if err := os.RemoveAll(filepath.Join(dir, previous)); err != nil {
			return err
		}
	}
	return nil
}

// MountConfigMap is Write for tests: it fails the test on an error.
func MountConfigMap(t testing.TB, dir string, keys map[string][]byte) {
	t.Helper()
	if err := Write(dir, keys); err != nil {
		t.Fatal(err)
	}
}

// Keys turns a ConfigMap's Data and BinaryData into volume keys.
func Keys(data map[string]string, binary map[string][]byte) map[string][]byte {
	keys := make(map[string][]byte, len(data)+len(binary))
	for k, v := range data {
		keys[k] = []byte(v)
	}
	for k, v := range binary {
		keys[k] = v
	}
	return keys
}
