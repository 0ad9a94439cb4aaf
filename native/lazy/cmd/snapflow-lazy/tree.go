package main

import (
	"bufio"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"snapflow/native/lazy/internal/beneath"
)

// mergeCmd moves an extracted layer's staging directory into its target without following a symlink in the
// target (internal/beneath); answers {"moved": N}.
func mergeCmd(args []string) error {
	fs := newFlags("merge")
	staging := fs.String("staging", "", "the extracted layer")
	target := fs.String("target", "", "the tree it joins")
	extractedAt := fs.Int64("extracted-at", 0, "when extraction began, ms since the epoch")
	keepOwners := fs.Bool("keep-owners", false, "give directories that were archive entries their archived owner")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := required(fs, "staging", "target"); err != nil {
		return err
	}
	from, err := beneath.OpenRoot(*staging)
	if err != nil {
		return err
	}
	defer unix.Close(from)
	to, err := beneath.OpenRoot(*target)
	if err != nil {
		return err
	}
	defer unix.Close(to)
	moved, err := beneath.Merge(from, to, beneath.MergeOptions{ExtractedAtMs: *extractedAt, KeepOwners: *keepOwners})
	if err != nil {
		return err
	}
	return printJSON(map[string]int{"moved": moved})
}

// removeCmd removes the NUL-separated relative entries on stdin below --root (a delta's deletions, which can be
// many and hold any byte but NUL: never argv); answers {"removed": N, "skipped": [...]}.
func removeCmd(args []string) error {
	return namesBelowRoot("remove", args, "the tree the entries are below", func(root int, entries []string) (any, error) {
		return beneath.Remove(root, entries)
	})
}

// opaqueCmd sets overlayfs' opaque mark on the NUL-separated relative directories on stdin below --root (a restored
// overlay upper; see beneath.MarkOpaque); answers {"marked": N}.
func opaqueCmd(args []string) error {
	return namesBelowRoot("opaque", args, "the upper directory the dirs are below", func(root int, dirs []string) (any, error) {
		marked, err := beneath.MarkOpaque(root, dirs)
		return map[string]int{"marked": marked}, err
	})
}

// namesBelowRoot runs a subcommand that takes --root and a NUL-separated list of relative names on stdin, with the
// root held open as a descriptor, and prints what it answers.
func namesBelowRoot(name string, args []string, rootHelp string, run func(root int, names []string) (any, error)) error {
	fs := newFlags(name)
	root := fs.String("root", "", rootHelp)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := required(fs, "root"); err != nil {
		return err
	}
	list, err := io.ReadAll(bufio.NewReader(os.Stdin))
	if err != nil {
		return err
	}
	names := []string{}
	if len(list) > 0 {
		names = strings.Split(strings.TrimSuffix(string(list), "\x00"), "\x00")
	}
	dir, err := beneath.OpenRoot(*root)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	out, err := run(dir, names)
	if err != nil {
		return err
	}
	return printJSON(out)
}
