//go:build cgo

package czstd

/*
#include <stddef.h>
// zstd.h's stable API (zstd ≥ 1.4.0), declared here: the library itself is the one github.com/DataDog/zstd compiles.
typedef struct ZSTD_CCtx_s ZSTD_CCtx;
extern ZSTD_CCtx* ZSTD_createCCtx(void);
extern size_t ZSTD_freeCCtx(ZSTD_CCtx* cctx);
extern size_t ZSTD_CCtx_setParameter(ZSTD_CCtx* cctx, int param, int value);
extern size_t ZSTD_compress2(ZSTD_CCtx* cctx, void* dst, size_t dstCapacity, const void* src, size_t srcSize);
extern unsigned ZSTD_isError(size_t code);
extern const char* ZSTD_getErrorName(size_t code);
extern size_t ZSTD_compressBound(size_t srcSize);
extern unsigned ZSTD_versionNumber(void);

// ZSTD_cParameter values (zstd.h: stable since 1.4.0)
#define SNAPFLOW_ZSTD_c_compressionLevel 100
#define SNAPFLOW_ZSTD_c_checksumFlag 201
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"

	_ "github.com/DataDog/zstd" // links the zstd library the declarations above call
)

// Native says whether New's encoder is zstd's C library (a cgo build) or klauspost's.
const Native = true

// Version is the C library's, e.g. "1.5.7".
func Version() string {
	v := uint(C.ZSTD_versionNumber())
	return fmt.Sprintf("%d.%d.%d", v/10000, v/100%100, v%100)
}

type encoder struct {
	level    int
	checksum bool
	ctxs     sync.Pool // *C.ZSTD_CCtx, one per goroutine encoding at once
}

// New is an encoder at level; checksum asks for the frame's content checksum (XXH64). Its contexts are made as
// concurrent calls need them, so concurrency is only the pure-Go build's bound.
func New(level int, checksum bool, concurrency int) (Encoder, error) {
	e := &encoder{level: level, checksum: checksum}
	ctx, err := e.newCtx()
	if err != nil {
		return nil, err
	}
	e.ctxs.Put(ctx)
	return e, nil
}

func (e *encoder) newCtx() (*C.ZSTD_CCtx, error) {
	ctx := C.ZSTD_createCCtx()
	if ctx == nil {
		return nil, fmt.Errorf("zstd: cannot create a compression context")
	}
	check := 0
	if e.checksum {
		check = 1
	}
	for _, p := range [][2]C.int{{C.SNAPFLOW_ZSTD_c_compressionLevel, C.int(e.level)}, {C.SNAPFLOW_ZSTD_c_checksumFlag, C.int(check)}} {
		if r := C.ZSTD_CCtx_setParameter(ctx, p[0], p[1]); C.ZSTD_isError(r) != 0 {
			C.ZSTD_freeCCtx(ctx)
			return nil, fmt.Errorf("zstd: parameter %d = %d: %s", p[0], p[1], C.GoString(C.ZSTD_getErrorName(r)))
		}
	}
	return ctx, nil
}

// EncodeAll appends one frame holding src to dst. A context the pool does not have is made (and kept): a failure to
// make one, or to compress into a buffer of zstd's own bound, is a bug or an out-of-memory, and panics.
func (e *encoder) EncodeAll(src, dst []byte) []byte {
	ctx, _ := e.ctxs.Get().(*C.ZSTD_CCtx)
	if ctx == nil {
		var err error
		if ctx, err = e.newCtx(); err != nil {
			panic(err)
		}
	}
	defer e.ctxs.Put(ctx)
	bound := int(C.ZSTD_compressBound(C.size_t(len(src))))
	if cap(dst)-len(dst) < bound {
		grown := make([]byte, len(dst), len(dst)+bound)
		copy(grown, dst)
		dst = grown
	}
	out := dst[len(dst):cap(dst)]
	var in unsafe.Pointer
	if len(src) > 0 {
		in = unsafe.Pointer(&src[0])
	}
	n := C.ZSTD_compress2(ctx, unsafe.Pointer(&out[0]), C.size_t(len(out)), in, C.size_t(len(src)))
	if C.ZSTD_isError(n) != 0 {
		panic(fmt.Sprintf("zstd: compress2: %s", C.GoString(C.ZSTD_getErrorName(n))))
	}
	return dst[:len(dst)+int(n)]
}
