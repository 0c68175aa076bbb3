package awsconfig

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// isolate leaves the test process with only the AWS variables of env: every other AWS_* variable
// is unset (restored after the test) and the shared config files point at nothing, so
// config.LoadDefaultConfig sees what a Lambda execution environment gives it.
func isolate(t *testing.T, env map[string]string) {
	t.Helper()
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "AWS_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	dir := t.TempDir()
	t.Setenv("HOME", dir)
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	for k, v := range env {
		t.Setenv(k, v)
	}
}

// settings are the aws.Config values (and what the SQS and S3 clients make of the config
// sources) that the two loaders must agree on; functions and the logger are compared by kind.
type settings struct {
	Region, AppID, BaseEndpoint                 string
	RetryMaxAttempts                            int
	RetryMode                                   aws.RetryMode
	CustomRetryer                               bool
	DefaultsMode                                aws.DefaultsMode
	RuntimeEnvironment                          aws.RuntimeEnvironment
	DisableRequestCompression, DisableClockSkew bool
	RequestMinCompressSizeBytes                 int64
	AccountIDEndpointMode                       aws.AccountIDEndpointMode
	RequestChecksumCalculation                  aws.RequestChecksumCalculation
	ResponseChecksumValidation                  aws.ResponseChecksumValidation
	AuthSchemePreference                        []string
	RestrictFilePermissions                     aws.RestrictFilePermissions
	ClientLogMode                               aws.ClientLogMode
	HTTPClient, Logger, CredentialsType         string
	Credentials                                 aws.Credentials
	CredentialSources                           []aws.CredentialSource
	SQSEndpoint, S3Endpoint                     string
	SQSFIPS                                     aws.FIPSEndpointState
	SQSDualStack                                aws.DualStackEndpointState
	S3UseARNRegion, S3DisableMRAP               bool
}

func settingsOf(t *testing.T, cfg aws.Config) settings {
	t.Helper()
	creds, err := cfg.Credentials.Retrieve(context.Background())
	if err != nil {
		t.Fatalf("credentials: %v", err)
	}
	s := settings{Region: cfg.Region, AppID: cfg.AppID, RetryMaxAttempts: cfg.RetryMaxAttempts, RetryMode: cfg.RetryMode,
		CustomRetryer: cfg.Retryer != nil, DefaultsMode: cfg.DefaultsMode, RuntimeEnvironment: cfg.RuntimeEnvironment,
		DisableRequestCompression: cfg.DisableRequestCompression, DisableClockSkew: cfg.DisableClockSkewCorrection,
		RequestMinCompressSizeBytes: cfg.RequestMinCompressSizeBytes, AccountIDEndpointMode: cfg.AccountIDEndpointMode,
		RequestChecksumCalculation: cfg.RequestChecksumCalculation, ResponseChecksumValidation: cfg.ResponseChecksumValidation,
		AuthSchemePreference: cfg.AuthSchemePreference, RestrictFilePermissions: cfg.RestrictFilePermissions,
		ClientLogMode: cfg.ClientLogMode, HTTPClient: fmt.Sprintf("%T", cfg.HTTPClient),
		Logger: fmt.Sprintf("%T", cfg.Logger), CredentialsType: fmt.Sprintf("%T", cfg.Credentials), Credentials: creds}
	s.Credentials.Expires = s.Credentials.Expires.UTC()
	// The sources the SDK's user agent reports (credential feature tracking).
	if p, ok := cfg.Credentials.(interface{ ProviderSources() []aws.CredentialSource }); ok {
		s.CredentialSources = p.ProviderSources()
	}
	if cfg.BaseEndpoint != nil {
		s.BaseEndpoint = *cfg.BaseEndpoint
	}
	sq := sqs.NewFromConfig(cfg).Options()
	s.SQSEndpoint, s.SQSFIPS, s.SQSDualStack = aws.ToString(sq.BaseEndpoint), sq.EndpointOptions.UseFIPSEndpoint, sq.EndpointOptions.UseDualStackEndpoint
	s3o := s3.NewFromConfig(cfg).Options()
	s.S3Endpoint, s.S3UseARNRegion, s.S3DisableMRAP = aws.ToString(s3o.BaseEndpoint), s3o.UseARNRegion, s3o.DisableMultiRegionAccessPoints
	return s
}

// FromEnvironment must give the clients what config.LoadDefaultConfig gives them from the same
// environment (and no shared config files): a Lambda's, one with local endpoints as the RIE tests
// set them, one with every tuning variable, and with each Options field.
func TestFromEnvironmentIsLoadDefaultConfig(t *testing.T) {
	lambda := map[string]string{"AWS_REGION": "us-west-2", "AWS_DEFAULT_REGION": "us-west-2", "AWS_ACCESS_KEY_ID": "ASIAEXAMPLE",
		"AWS_SECRET_ACCESS_KEY": "secret", "AWS_SESSION_TOKEN": "token", "AWS_EXECUTION_ENV": "AWS_Lambda_provided.al2023",
		"AWS_LAMBDA_FUNCTION_NAME": "dovetail-provision"}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range lambda {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	staticCreds := credentials.NewStaticCredentialsProvider("AKIDOPTION", "option-secret", "")
	for _, c := range []struct {
		name string
		env  map[string]string
		o    Options
	}{
		{"lambda", lambda, Options{}},
		{"default region only", map[string]string{"AWS_DEFAULT_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "s"}, Options{}},
		{"local endpoints", with(map[string]string{"AWS_ENDPOINT_URL": "http://127.0.0.1:4566", "AWS_ENDPOINT_URL_SQS": "http://127.0.0.1:9324"}), Options{}},
		{"ignored endpoints", with(map[string]string{"AWS_ENDPOINT_URL": "http://127.0.0.1:4566", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "true"}), Options{}},
		{"tuned", with(map[string]string{"AWS_MAX_ATTEMPTS": "7", "AWS_RETRY_MODE": "adaptive", "AWS_USE_FIPS_ENDPOINT": "true",
			"AWS_USE_DUALSTACK_ENDPOINT": "true", "AWS_SDK_UA_APP_ID": "dovetail", "AWS_DEFAULTS_MODE": "standard",
			"AWS_DISABLE_REQUEST_COMPRESSION": "true", "AWS_REQUEST_MIN_COMPRESSION_SIZE_BYTES": "100",
			"AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled", "AWS_REQUEST_CHECKSUM_CALCULATION": "when_required",
			"AWS_RESPONSE_CHECKSUM_VALIDATION": "when_required", "AWS_AUTH_SCHEME_PREFERENCE": "sigv4a,sigv4",
			"AWS_S3_USE_ARN_REGION": "true", "AWS_S3_DISABLE_MULTIREGION_ACCESS_POINTS": "true", "AWS_ACCOUNT_ID": "123456789012"}), Options{}},
		// auto: the runtime environment comes from AWS_EXECUTION_ENV and AWS_REGION; instance
		// metadata, which LoadDefaultConfig also asks for its region, is off here as in a Lambda.
		{"auto defaults mode", with(map[string]string{"AWS_DEFAULTS_MODE": "auto"}), Options{}},
		{"options", lambda, Options{Region: "ap-south-1", Credentials: staticCreds, Retryer: func() aws.Retryer { return retry.NewStandard() }}},
		{"retryer wins over the environment's", with(map[string]string{"AWS_MAX_ATTEMPTS": "7"}), Options{Retryer: func() aws.Retryer { return retry.NewStandard() }}},
	} {
		t.Run(c.name, func(t *testing.T) {
			isolate(t, c.env)
			var opts []func(*config.LoadOptions) error
			if c.o.Region != "" {
				opts = append(opts, config.WithRegion(c.o.Region))
			}
			if c.o.Credentials != nil {
				opts = append(opts, config.WithCredentialsProvider(c.o.Credentials))
			}
			if c.o.Retryer != nil {
				opts = append(opts, config.WithRetryer(c.o.Retryer))
			}
			want, err := config.LoadDefaultConfig(context.Background(), opts...)
			if err != nil {
				t.Fatal(err)
			}
			got, err := FromEnvironment(c.o)
			if err != nil {
				t.Fatal(err)
			}
			if w, g := settingsOf(t, want), settingsOf(t, got); !reflect.DeepEqual(w, g) {
				t.Errorf("FromEnvironment\n got %+v\nwant %+v (LoadDefaultConfig)", g, w)
			}
		})
	}
}

// The spot checks of the table above by hand: the values are the environment's, not the
// defaults, so the comparison cannot pass by both loaders ignoring a variable.
func TestFromEnvironmentReadsTheEnvironment(t *testing.T) {
	isolate(t, map[string]string{"AWS_REGION": "us-gov-west-1", "AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "s",
		"AWS_ENDPOINT_URL_SQS": "http://127.0.0.1:9324", "AWS_MAX_ATTEMPTS": "7", "AWS_USE_FIPS_ENDPOINT": "true"})
	cfg, err := FromEnvironment(Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := settingsOf(t, cfg)
	if s.Region != "us-gov-west-1" || s.Credentials.AccessKeyID != "AKID" || s.SQSEndpoint != "http://127.0.0.1:9324" || s.S3Endpoint != "" ||
		s.RetryMaxAttempts != 7 || s.SQSFIPS != aws.FIPSEndpointStateEnabled || s.CredentialsType != "*aws.CredentialsCache" {
		t.Errorf("settings %+v", s)
	}
}

// What needs a file or another credential provider is refused with the variable's name.
func TestFromEnvironmentRefusesWhatItDoesNotRead(t *testing.T) {
	keys := map[string]string{"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "s"}
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"AWS_REGION": "us-east-1"}, "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY: not set"},
		{map[string]string{"AWS_REGION": "us-east-1", "AWS_WEB_IDENTITY_TOKEN_FILE": "/var/run/token", "AWS_ROLE_ARN": "arn:aws:iam::123456789012:role/r"}, "AWS_WEB_IDENTITY_TOKEN_FILE is set without AWS_ACCESS_KEY_ID"},
		{map[string]string{"AWS_REGION": "us-east-1", "AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://127.0.0.1:9999/creds"}, "AWS_CONTAINER_CREDENTIALS_FULL_URI or _RELATIVE_URI is set"},
		{map[string]string{"AWS_PROFILE": "dev", "AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "s"}, `AWS_PROFILE "dev": a profile lives in the shared config files`},
		{map[string]string{"AWS_CA_BUNDLE": "/nonexistent/ca.pem", "AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "s"}, "AWS_CA_BUNDLE: open /nonexistent/ca.pem: "},
		{map[string]string{"AWS_CA_BUNDLE": "awsconfig.go", "AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "s"}, `AWS_CA_BUNDLE "awsconfig.go": no PEM certificate in the file`},
		{map[string]string{"AWS_MAX_ATTEMPTS": "many"}, "AWS settings in the environment: "},
	} {
		isolate(t, c.env)
		if _, err := FromEnvironment(Options{}); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("env %v: error %v, want one starting %q", c.env, err, c.want)
		}
	}
	// With static keys, the other providers' variables are not used (as in the default chain).
	isolate(t, keys)
	t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", "/var/run/token")
	if _, err := FromEnvironment(Options{}); err != nil {
		t.Errorf("static keys with a web identity token file: %v", err)
	}
}

// AWS_CA_BUNDLE: the clients trust the bundle's certificates and no others, under both loaders.
func TestFromEnvironmentTrustsTheCABundle(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "dovetail test CA"}, IsCA: true,
		BasicConstraintsValid: true, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(bundle, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	only := x509.NewCertPool()
	only.AddCert(cert)
	isolate(t, map[string]string{"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "s", "AWS_CA_BUNDLE": bundle})
	want, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got, err := FromEnvironment(Options{})
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]aws.Config{"LoadDefaultConfig": want, "FromEnvironment": got} {
		bc, ok := cfg.HTTPClient.(*awshttp.BuildableClient)
		if !ok {
			t.Fatalf("%s: HTTP client %T, want *http.BuildableClient", name, cfg.HTTPClient)
		}
		if tc := bc.GetTransport().TLSClientConfig; tc == nil || !tc.RootCAs.Equal(only) || tc.MinVersion != tls.VersionTLS12 {
			t.Errorf("%s: TLS config %+v, want the bundle's one certificate as the roots and TLS 1.2 at least (the SDK's minimum)", name, tc)
		}
	}
}
