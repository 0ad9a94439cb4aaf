package main

import "snapflow/native/lazy/internal/treesize"

// sizeCmd prints {"entries","bytes","tarMax","ms"}: how large a tar archive of the tree can be at most
// (internal/treesize), so a presigned multipart upload can be given enough part URLs before the pass starts.
func sizeCmd(args []string) error {
	fs := newFlags("size")
	root := fs.String("root", "", "the tree to count")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := required(fs, "root"); err != nil {
		return err
	}
	r, err := treesize.Count(*root)
	if err != nil {
		return err
	}
	return printJSON(r)
}
