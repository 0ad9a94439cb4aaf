// Package fusefs exposes an image as a one-file, read-only FUSE filesystem: MOUNTPOINT/image. Attributes never change,
// so the kernel may cache them and the file's pages for as long as it likes; every read goes to lazyimage, and a read
// that cannot be served from verified chunks fails with EIO.
package fusefs

import (
	"context"
	"errors"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"snapflow/native/lazy/internal/lazyimage"
)

// FileName is the image's name inside the mountpoint.
const FileName = "image"

type root struct {
	fs.Inode
	img   *lazyimage.Image
	mtime time.Time
}

var _ fs.NodeOnAdder = (*root)(nil)

func (r *root) OnAdd(ctx context.Context) {
	child := r.NewPersistentInode(ctx, &imageFile{img: r.img, mtime: r.mtime}, fs.StableAttr{Mode: fuse.S_IFREG, Ino: 2})
	r.AddChild(FileName, child, false)
}

type imageFile struct {
	fs.Inode
	img   *lazyimage.Image
	mtime time.Time
}

var (
	_ fs.NodeGetattrer = (*imageFile)(nil)
	_ fs.NodeOpener    = (*imageFile)(nil)
	_ fs.NodeReader    = (*imageFile)(nil)
)

func (f *imageFile) Getattr(ctx context.Context, _ fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = fuse.S_IFREG | 0o444
	out.Size = uint64(f.img.Size())
	out.Blocks = (out.Size + 511) / 512
	out.SetTimes(nil, &f.mtime, &f.mtime)
	return fs.OK
}

func (f *imageFile) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if flags&(syscall.O_WRONLY|syscall.O_RDWR) != 0 {
		return nil, 0, syscall.EROFS
	}
	// KEEP_CACHE: the content never changes, so pages read once stay valid across opens.
	return nil, fuse.FOPEN_KEEP_CACHE, fs.OK
}

func (f *imageFile) Read(ctx context.Context, _ fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	n, err := f.img.ReadAt(ctx, dest, off)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return nil, syscall.EINTR
		}
		return nil, syscall.EIO
	}
	return fuse.ReadResultData(dest[:n]), fs.OK
}

// Options for Mount.
type Options struct {
	AllowOther bool // let users other than the mounting one read (needs user_allow_other for non-root)
	Debug      bool
}

// Mount mounts img at mountpoint and returns once the kernel has the mount (the caller then checks it answers).
func Mount(mountpoint string, img *lazyimage.Image, o Options) (*fuse.Server, error) {
	forever := time.Hour
	return fs.Mount(mountpoint, &root{img: img, mtime: time.Now()}, &fs.Options{
		EntryTimeout: &forever,
		AttrTimeout:  &forever,
		MountOptions: fuse.MountOptions{
			FsName:       "snapflow-lazy",
			Name:         "snapflow-lazy",
			AllowOther:   o.AllowOther,
			DirectMount:  true, // as root, mount(2) directly; otherwise go-fuse falls back to fusermount
			MaxReadAhead: 1 << 20,
			Debug:        o.Debug,
		},
	})
}
