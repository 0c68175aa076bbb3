// Package s3blob is an Amazon S3 events.BlobStore for the claim check: event payloads too large
// for an SQS message are stored as objects under a key prefix, and the event carries their
// "s3://bucket/prefix/key" URI. The bucket's lifecycle rule (infra/aws) expires objects under the
// prefix after a day, longer than any message lives in the queue plus its retries.
package s3blob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/dovetail-dev/dovetail/events"
)

// DefaultPrefix is where claim-checked payloads live in the bucket; infra/aws's lifecycle rule
// expires this prefix.
const DefaultPrefix = "claim-check/"

// API is the part of *s3.Client the store calls.
type API interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error)
}

var _ API = (*s3.Client)(nil)

// Store keeps blobs as objects "<Prefix><key>" in Bucket. It implements events.BlobStore.
type Store struct {
	Client API
	Bucket string
	// Prefix is prepended to every key; "" means DefaultPrefix. It should end in "/".
	Prefix string
}

var _ events.BlobStore = (*Store)(nil)

func (s *Store) prefix() string {
	if s.Prefix == "" {
		return DefaultPrefix
	}
	return s.Prefix
}

// keyRE is the key shape the events package writes ("<cluster>/<sha256>.json.zst"): relative
// slash-separated segments of [A-Za-z0-9._-].
var keyRE = regexp.MustCompile(`^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$`)

// Put stores data at Prefix+key (a PUT of the same key and data is idempotent) and returns
// "s3://<bucket>/<prefix><key>".
func (s *Store) Put(ctx context.Context, key string, data []byte) (string, error) {
	if err := checkKey(key); err != nil {
		return "", err
	}
	if s.Bucket == "" {
		return "", errors.New("s3 blob store bucket: required")
	}
	objKey := s.prefix() + key
	_, err := s.Client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(s.Bucket), Key: aws.String(objKey), Body: bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))), ContentType: aws.String(events.ContentTypeJSONZstd),
	})
	if err != nil {
		return "", fmt.Errorf("s3 put s3://%s/%s: %w", s.Bucket, objKey, err)
	}
	return "s3://" + s.Bucket + "/" + objKey, nil
}

// Get returns the object at an s3:// URI of this store's bucket and prefix. A URI of another
// bucket or outside the prefix, or an object that does not exist (expired), wraps
// events.ErrBlobNotFound.
func (s *Store) Get(ctx context.Context, uri string) ([]byte, error) {
	rest, ok := strings.CutPrefix(uri, "s3://")
	if !ok {
		return nil, fmt.Errorf("%w: %q is not an s3:// URI", events.ErrBlobNotFound, uri)
	}
	bucket, objKey, _ := strings.Cut(rest, "/")
	key, inPrefix := strings.CutPrefix(objKey, s.prefix())
	if bucket != s.Bucket || !inPrefix || checkKey(key) != nil {
		return nil, fmt.Errorf("%w: %s is outside this store (s3://%s/%s)", events.ErrBlobNotFound, uri, s.Bucket, s.prefix())
	}
	out, err := s.Client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(objKey)})
	if err != nil {
		var nsk *types.NoSuchKey
		var api smithy.APIError
		if errors.As(err, &nsk) || (errors.As(err, &api) && api.ErrorCode() == "NotFound") {
			return nil, fmt.Errorf("%w: %s", events.ErrBlobNotFound, uri)
		}
		return nil, fmt.Errorf("s3 get %s: %w", uri, err)
	}
	defer out.Body.Close()
	if n := aws.ToInt64(out.ContentLength); n > events.MaxBlobBytes {
		return nil, fmt.Errorf("%w: %s is %d bytes, at most %d", events.ErrBlobTooLarge, uri, n, events.MaxBlobBytes)
	}
	data, err := events.ReadBlob(out.Body, uri)
	if err != nil {
		return nil, fmt.Errorf("s3 get %s: reading body: %w", uri, err)
	}
	return data, nil
}

func checkKey(key string) error {
	if !keyRE.MatchString(key) {
		return fmt.Errorf("blob key %q: must be a relative path of [A-Za-z0-9._-] segments", key)
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == "." || seg == ".." {
			return fmt.Errorf("blob key %q: must not contain %q segments", key, seg)
		}
	}
	return nil
}

// URI is the s3:// URI Put gives key.
func (s *Store) URI(key string) string { return "s3://" + s.Bucket + "/" + s.prefix() + key }
