package main

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path"
	"runtime"
	"strings"
)

// systemLibDirs are the folders the dynamic loader searches without an
// ld.so.cache, in its order (`ld.so --help` lists them on Debian). Images
// have no cache, so a library is taken from these folders only and put at
// the same path in the image, where the loader finds it the same way.
func systemLibDirs() []string {
	triplet := map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}[runtime.GOARCH]
	dirs := []string{}
	if triplet != "" {
		dirs = append(dirs, "/lib/"+triplet, "/usr/lib/"+triplet)
	}
	return append(dirs, "/lib", "/usr/lib")
}

// program is a host binary put into an image.
type program struct {
	// path is where it goes in the image, without a leading slash.
	path string
	// src is the host file.
	src string
	// advice says what to install when src cannot go into an image: it is
	// missing, not an ELF binary, or needs libraries the host lacks.
	advice string
}

// runtimeFiles returns the host files a binary needs to run, besides
// itself: nothing for a static binary (no ELF interpreter); for a dynamic
// one, its interpreter and the closure of its DT_NEEDED libraries, each
// looked up in libDirs. It fails when src is not an ELF binary or a library
// is in none of libDirs, rather than let an image be written that cannot
// run.
func runtimeFiles(src string, libDirs []string) ([]string, error) {
	f, err := elf.Open(src)
	if err != nil {
		return nil, fmt.Errorf("failed to read %s as an ELF binary: %w", src, err)
	}
	defer f.Close()
	interp, err := interpreter(f)
	if err != nil {
		return nil, fmt.Errorf("failed to read the interpreter of %s: %w", src, err)
	}
	if interp == "" {
		return nil, nil
	}
	if err := sameKind(interp, f); err != nil {
		return nil, fmt.Errorf("%s is dynamically linked and its interpreter %s is unusable: %w", src, interp, err)
	}
	files := []string{interp}
	seen := map[string]bool{}
	queue := []string{src}
	for len(queue) > 0 {
		next := queue[0]
		queue = queue[1:]
		needed, err := neededLibs(next)
		if err != nil {
			return nil, err
		}
		for _, lib := range needed {
			if seen[lib] {
				continue
			}
			seen[lib] = true
			found, err := findLib(lib, libDirs, f)
			if err != nil {
				return nil, fmt.Errorf("%s is dynamically linked and needs %s (through %s), which is in none of %s",
					src, lib, next, strings.Join(libDirs, " "))
			}
			files = append(files, found)
			queue = append(queue, found)
		}
	}
	return files, nil
}

// interpreter returns the binary's PT_INTERP, or "" for a static binary.
func interpreter(f *elf.File) (string, error) {
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil {
			return "", err
		}
		return strings.TrimRight(string(b), "\x00"), nil
	}
	return "", nil
}

func neededLibs(p string) ([]string, error) {
	f, err := elf.Open(p)
	if err != nil {
		return nil, fmt.Errorf("failed to read %s as an ELF library: %w", p, err)
	}
	defer f.Close()
	libs, err := f.ImportedLibraries()
	if err != nil {
		return nil, fmt.Errorf("failed to read the libraries %s needs: %w", p, err)
	}
	return libs, nil
}

// findLib returns the first file named lib in dirs that is an ELF object
// of the binary's class and machine, as the loader would pick it.
func findLib(lib string, dirs []string, bin *elf.File) (string, error) {
	if strings.Contains(lib, "/") {
		return "", fmt.Errorf("library %s is a path", lib)
	}
	for _, d := range dirs {
		p := path.Join(d, lib)
		if sameKind(p, bin) == nil {
			return p, nil
		}
	}
	return "", os.ErrNotExist
}

// sameKind fails unless p is an ELF object of bin's class and machine.
func sameKind(p string, bin *elf.File) error {
	f, err := elf.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	if f.Class != bin.Class || f.Machine != bin.Machine {
		return errors.New("an ELF object of another class or machine")
	}
	return nil
}

// addPrograms adds each program and what it needs to run to l; it fails,
// saying what to install, when one cannot run in an image.
func (l *layer) addPrograms(libDirs []string, programs ...program) error {
	for _, p := range programs {
		files, err := runtimeFiles(p.src, libDirs)
		if err != nil {
			return fmt.Errorf("failed to add /%s: %w: %s", p.path, err, p.advice)
		}
		l.copy(p.path, 0o755, p.src)
		for _, f := range files {
			l.copy(strings.TrimPrefix(f, "/"), 0o755, f)
		}
	}
	return nil
}
