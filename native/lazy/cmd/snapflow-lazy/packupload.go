package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"snapflow/native/lazy/internal/pack"
	"snapflow/native/lazy/internal/partupload"
)

// uploadSettings: pack's upload mode, from its flags and its request.
type uploadSettings struct {
	partSize, concurrency, retries int
	timeout                        time.Duration
	urls                           []string
	lie                            bool
}

// minPartSize is R2's (and S3's) least size of a part that is not the last.
const minPartSize = 5 << 20

// uploaded is what the Worker completes the upload with, beside the pass's own result.
type uploaded struct {
	Parts             []partupload.Part `json:"parts"`
	PeakBufferedBytes int64             `json:"peakBufferedBytes"`
	Retries           int               `json:"retries"`
}

// packUploadResult is a full pass's result plus its parts; deltaUploadResult a delta's (pack.DeltaResult's fields).
type packUploadResult struct {
	pack.Result
	uploaded
}

type deltaUploadResult struct {
	pack.DeltaResult
	uploaded
}

// packUpload makes the pass (a full one, or with delta a delta: pack.RunDelta) with the archive cut into parts and PUT
// as it is written (internal/partupload): no byte of it leaves through stdout. The result, or the error, goes to
// resultOut as in pack's stream mode; the upload itself is left for the Worker to complete or abort.
func packUpload(opts pack.Options, delta *pack.Delta, u uploadSettings, resultOut *os.File) error {
	res, err := packUploadRun(opts, delta, u)
	if err != nil {
		json.NewEncoder(resultOut).Encode(map[string]any{"error": uploadFailure(err)})
		return err
	}
	return json.NewEncoder(resultOut).Encode(res)
}

func packUploadRun(opts pack.Options, delta *pack.Delta, u uploadSettings) (any, error) {
	if len(u.urls) == 0 {
		return nil, &pack.Error{Code: "bad_request", Field: "urls", Message: "urls: upload mode needs the part URLs"}
	}
	if u.partSize < minPartSize {
		return nil, &pack.Error{Code: "bad_request", Field: "partSize", Message: fmt.Sprintf("partSize: %d is below the store's least part size, %d", u.partSize, minPartSize)}
	}
	w, err := partupload.New(context.Background(), partupload.Options{PartSize: u.partSize, Concurrency: u.concurrency, URLs: u.urls, Retries: u.retries, Timeout: u.timeout, Lie: u.lie})
	if err != nil {
		return nil, err
	}
	var full pack.Result
	var inc pack.DeltaResult
	if delta != nil {
		inc, err = pack.RunDelta(opts, *delta, w)
		full = inc.Result
	} else {
		full, err = pack.Run(opts, w)
	}
	if err != nil {
		w.Abort()
		// A write the upload refused reaches pack through zstd's writer: the upload's own error says why. (A base the
		// delta cannot use fails before a byte: its own error, base_unusable, is the answer.)
		if cause := w.Err(); cause != nil {
			return nil, cause
		}
		return nil, err
	}
	up, err := w.Close()
	if err != nil {
		return nil, err
	}
	if up.Bytes != full.Bytes {
		return nil, fmt.Errorf("the archive is %d bytes; %d were cut into parts", full.Bytes, up.Bytes)
	}
	parts := uploaded{Parts: up.Parts, PeakBufferedBytes: up.PeakBufferedBytes, Retries: up.Retries}
	if delta != nil {
		return deltaUploadResult{DeltaResult: inc, uploaded: parts}, nil
	}
	return packUploadResult{Result: full, uploaded: parts}, nil
}

// uploadFailure is the {code, message, field} the agent answers with: too few URLs is the caller's to fix (400 naming
// urls: the Worker signs more), an expired URL wants fresh ones, a refused part is final.
func uploadFailure(err error) *pack.Error {
	var known *pack.Error
	var few *partupload.TooFewURLs
	var store *partupload.StoreError
	switch {
	case errors.As(err, &known):
		return known
	case errors.As(err, &few):
		return &pack.Error{Code: "bad_request", Field: "urls", Message: few.Error()}
	case errors.As(err, &store) && store.Expired:
		return &pack.Error{Code: "url_expired", Message: fmt.Sprintf("presigned PUT of part %d: presigned URL expired before it was used (%s); a retry signs fresh URLs", store.PartNumber, store.Describe())}
	case errors.As(err, &store) && store.Refused:
		return &pack.Error{Code: "store_refused", Message: store.Error()}
	default:
		return &pack.Error{Code: "tool_failed", Message: err.Error()}
	}
}
