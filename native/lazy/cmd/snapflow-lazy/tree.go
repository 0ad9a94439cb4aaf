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
	fs := newFlags("remove")
	root := fs.String("root", "", "the tree the entries are below")
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
	entries := []string{}
	if len(list) > 0 {
		entries = strings.Split(strings.TrimSuffix(string(list), "\x00"), "\x00")
	}
	dir, err := beneath.OpenRoot(*root)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	out, err := beneath.Remove(dir, entries)
	if err != nil {
		return err
	}
	return printJSON(out)
}

// opaqueCmd sets overlayfs' opaque mark on the NUL-separated relative directories on stdin below --root (a restored
// overlay upper; see beneath.MarkOpaque); answers {"marked": N}.
func opaqueCmd(args []string) error {
	fs := newFlags("opaque")
	root := fs.String("root", "", "the upper directory the dirs are below")
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
	dirs := []string{}
	if len(list) > 0 {
		dirs = strings.Split(strings.TrimSuffix(string(list), "\x00"), "\x00")
	}
	dir, err := beneath.OpenRoot(*root)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	marked, err := beneath.MarkOpaque(dir, dirs)
	if err != nil {
		return err
	}
	return printJSON(map[string]int{"marked": marked})
}
