module snapflow/native/lazy

go 1.26

require (
	github.com/hanwen/go-fuse/v2 v2.12.1
	github.com/jotfs/fastcdc-go v0.2.0
	golang.org/x/sys v0.28.0
)

require github.com/goccy/go-json v0.12.0

require (
	github.com/DataDog/zstd v1.5.7
	github.com/klauspost/compress v1.20.4
	github.com/tinylib/msgp v1.6.5
)

require (
	github.com/philhofer/fwd v1.2.0 // indirect
	golang.org/x/mod v0.18.0 // indirect
	golang.org/x/tools v0.22.0 // indirect
)

tool github.com/tinylib/msgp
