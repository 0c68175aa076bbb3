// Package azureblob keeps Dovetail's claim checks and dead letters in Azure Blob Storage
// (azure-sdk-for-go storage/azblob): Store is the events.BlobStore of the Azure transport (event
// payloads too large for an Event Grid event, stored as block blobs under a prefix of one
// container, the event carrying the blob's URL), and DeadLetters writes poison events with their
// reason into the container Event Grid's own storage dead-letter destination uses.
//
// The storage account's lifecycle management policy (infra/azure) deletes blobs under the
// claim-check prefix after a day, longer than any event lives in Event Grid with its retries.
package azureblob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/dovetail-dev/dovetail/events"
)

// DefaultPrefix is where claim-checked payloads live in the container; infra/azure's lifecycle
// rule deletes blobs under it after a day.
const DefaultPrefix = "claim-check/"

// Store keeps blobs as block blobs "<Prefix><key>" in one container. It implements
// events.BlobStore; its URIs are the blobs' URLs.
type Store struct {
	Container *container.Client
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

// URI is the URL Put gives key: "<container URL>/<prefix><key>".
func (s *Store) URI(key string) string {
	return strings.TrimSuffix(s.Container.URL(), "/") + "/" + s.prefix() + key
}

// Put uploads data as the block blob Prefix+key (one Put Blob call up to 256 MiB, far above
// events.MaxBlobBytes; an upload of the same key and data is idempotent) and returns its URL.
func (s *Store) Put(ctx context.Context, key string, data []byte) (string, error) {
	if err := events.CheckBlobKey(key); err != nil {
		return "", err
	}
	if s.Container == nil {
		return "", errors.New("azure blob store container: required")
	}
	name := s.prefix() + key
	_, err := s.Container.NewBlockBlobClient(name).UploadBuffer(ctx, data, &blockblob.UploadBufferOptions{
		HTTPHeaders: &blob.HTTPHeaders{BlobContentType: to.Ptr(events.ContentTypeJSONZstd)},
	})
	if err != nil {
		return "", fmt.Errorf("azure blob put %s: %w", s.URI(key), err)
	}
	return s.URI(key), nil
}

// Get downloads the blob at a URL of this store's container and prefix. A URL elsewhere, or a
// blob that does not exist (deleted by the lifecycle rule), wraps events.ErrBlobNotFound; a blob
// above events.MaxBlobBytes wraps events.ErrBlobTooLarge, refused by its Content-Length before
// the body is read, and the body is read through the same limit.
func (s *Store) Get(ctx context.Context, uri string) ([]byte, error) {
	base := strings.TrimSuffix(s.Container.URL(), "/") + "/" + s.prefix()
	key, ok := strings.CutPrefix(uri, base)
	if !ok || events.CheckBlobKey(key) != nil {
		return nil, fmt.Errorf("%w: %s is outside this store (%s)", events.ErrBlobNotFound, uri, base)
	}
	resp, err := s.Container.NewBlobClient(s.prefix()+key).DownloadStream(ctx, nil)
	if err != nil {
		if bloberror.HasCode(err, bloberror.BlobNotFound, bloberror.ContainerNotFound) {
			return nil, fmt.Errorf("%w: %s", events.ErrBlobNotFound, uri)
		}
		return nil, fmt.Errorf("azure blob get %s: %w", uri, err)
	}
	defer resp.Body.Close()
	if n := resp.ContentLength; n != nil && *n > events.MaxBlobBytes {
		return nil, fmt.Errorf("%w: %s is %d bytes, at most %d", events.ErrBlobTooLarge, uri, *n, events.MaxBlobBytes)
	}
	data, err := events.ReadBlob(resp.Body, uri)
	if err != nil {
		return nil, fmt.Errorf("azure blob get %s: reading body: %w", uri, err)
	}
	return data, nil
}

// putJSON uploads a JSON document (dead letters).
func putJSON(ctx context.Context, c *container.Client, name string, data []byte) error {
	_, err := c.NewBlockBlobClient(name).Upload(ctx, streaming.NopCloser(bytes.NewReader(data)), &blockblob.UploadOptions{
		HTTPHeaders: &blob.HTTPHeaders{BlobContentType: to.Ptr("application/json")},
	})
	return err
}

// EnvConnectionString is a storage connection string read only from the environment (local
// endpoints such as Azurite); deployments leave it unset and use Microsoft Entra ID.
const EnvConnectionString = "DOVETAIL_STORAGE_CONNECTION_STRING"

// NewContainer is a client of one container: from EnvConnectionString when set, else of
// accountURL ("https://<account>.blob.core.windows.net") with cred. opts may be nil.
func NewContainer(accountURL, name string, cred azcore.TokenCredential, opts *container.ClientOptions) (*container.Client, error) {
	if name == "" {
		return nil, errors.New("blob container name: required")
	}
	if cs := os.Getenv(EnvConnectionString); cs != "" {
		return container.NewClientFromConnectionString(cs, name, opts)
	}
	if accountURL == "" || cred == nil {
		return nil, fmt.Errorf("blob container %s: an account URL and a credential are required when %s is unset", name, EnvConnectionString)
	}
	return container.NewClient(strings.TrimSuffix(accountURL, "/")+"/"+name, cred, opts)
}
