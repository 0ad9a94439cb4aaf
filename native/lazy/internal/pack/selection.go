package pack

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"

	"golang.org/x/sys/unix"
)

// Selection is a backup's selection as the agent compiled it (container/archive/selection.ts): the glob patterns
// already turned into regular expressions there (so both sides mean the same by a glob), the paths git ignores, and
// whether a CACHEDIR.TAG excludes its directory. Rules are asked in that order, as the agent asks them.
type Selection struct {
	Patterns []Pattern `json:"patterns"`
	// Ignored: paths relative to the root (directories without a trailing '/'), from git ls-files --ignored.
	Ignored       []string `json:"ignored"`
	ExcludeCaches bool     `json:"excludeCaches"`
	// Record is what the manifest says of the selection, less `excluded`, which the walk counts.
	Record *Record `json:"record"`
}

// Pattern is one exclude: the glob as written (its rule's name) and the expression globToRegExp made of it.
type Pattern struct {
	Pattern string `json:"pattern"`
	Re      string `json:"re"`
	DirOnly bool   `json:"dirOnly"`
}

// Record is the manifest's `selection` (protocol.ts SelectionRecord).
type Record struct {
	Excludes      []string       `json:"excludes"`
	Gitignore     bool           `json:"gitignore"`
	ExcludeCaches bool           `json:"excludeCaches"`
	Excluded      map[string]int `json:"excluded"`
	Warnings      []string       `json:"warnings"`
}

const cacheDirSignature = "Signature: 8a477f597d28d172789f06886806bc55"

type compiledPattern struct {
	rule    string
	re      *regexp.Regexp
	dirOnly bool
}

// selector answers, for each entry the walk meets, the rule that excludes it ("" for none) and counts the rules.
type selector struct {
	patterns []compiledPattern
	ignored  map[string]struct{}
	caches   bool
	counts   map[string]int
}

func compileSelection(s *Selection) (*selector, error) {
	sel := &selector{ignored: map[string]struct{}{}, counts: map[string]int{}}
	if s == nil {
		return sel, nil
	}
	for _, p := range s.Patterns {
		re, err := regexp.Compile(p.Re)
		if err != nil {
			return nil, fmt.Errorf("selection: pattern %q: %w", p.Pattern, err)
		}
		sel.patterns = append(sel.patterns, compiledPattern{rule: "exclude " + p.Pattern, re: re, dirOnly: p.DirOnly})
	}
	for _, p := range s.Ignored {
		sel.ignored[p] = struct{}{}
	}
	sel.caches = s.ExcludeCaches
	return sel, nil
}

// excluded asks the rules for rel (dir: the entry's descriptor-relative parent and name, for the tag check).
func (s *selector) excluded(rel string, isDir bool, parent int, name string) bool {
	rule := ""
	for _, p := range s.patterns {
		if (!p.dirOnly || isDir) && p.re.MatchString(rel) {
			rule = p.rule
			break
		}
	}
	if rule == "" {
		if _, ok := s.ignored[rel]; ok {
			rule = "gitignore"
		} else if s.caches && isDir && hasCacheTag(parent, name) {
			rule = "CACHEDIR.TAG"
		}
	}
	if rule == "" {
		return false
	}
	s.counts[rule]++
	return true
}

// hasCacheTag: the directory name (in parent) holds a CACHEDIR.TAG that begins with the standard signature. Neither
// the directory nor the tag is followed if it is a symlink.
func hasCacheTag(parent int, name string) bool {
	dir, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(dir)
	fd, err := unix.Openat(dir, "CACHEDIR.TAG", unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	buf := make([]byte, len(cacheDirSignature))
	n, err := unix.Pread(fd, buf, 0)
	for err != nil && errors.Is(err, unix.EINTR) {
		n, err = unix.Pread(fd, buf, 0)
	}
	return err == nil && n == len(buf) && bytes.Equal(buf, []byte(cacheDirSignature))
}
