// Package awsconfig loads the AWS SDK configuration of Dovetail's functions. Load is the SDK's
// default chain (config.LoadDefaultConfig: the environment, the shared config and credentials
// files, every credential provider), except in the Lambda build (-tags lambda.norpc,
// hack/package.sh), where it is FromEnvironment: a Lambda execution environment configures the
// SDK through environment variables only, and the default chain's credential providers link the
// SSO, SSO OIDC, sign-in and STS clients and the instance metadata client into every bootstrap
// (1.2 MB of its 20 MB budget) without any of them ever being used there.
package awsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/smithy-go/logging"
)

// Options override what the environment says.
type Options struct {
	// Region, when set, is used instead of AWS_REGION (AWS_DEFAULT_REGION).
	Region string
	// Credentials, when set, are used instead of the environment's (cached, as the SDK does).
	Credentials aws.CredentialsProvider
	// Retryer, when set, makes the clients' retryer; AWS_MAX_ATTEMPTS and AWS_RETRY_MODE are then
	// not read (as config.WithRetryer).
	Retryer func() aws.Retryer
}

// The SDK's defaults for settings the environment leaves unset, as config.LoadDefaultConfig
// applies them (aws-sdk-go-v2/config v1.33, resolve.go); TestFromEnvironmentIsLoadDefaultConfig
// checks they still agree.
const defaultRequestMinCompressSizeBytes = 10240

// FromEnvironment builds the SDK configuration config.LoadDefaultConfig builds for a process
// whose whole configuration is in environment variables, as a Lambda execution environment's
// is (AWS Lambda Developer Guide, "Defined runtime environment variables": AWS_REGION and the
// execution role's AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN). Every
// variable the SDK reads (config.NewEnvConfig: endpoints such as AWS_ENDPOINT_URL_SQS, FIPS
// and dual-stack endpoints, retries, checksums, compression, the defaults mode, the app ID) means
// what it means to LoadDefaultConfig: the clients see the same values through
// aws.Config.ConfigSources. Credentials are the environment's static keys.
//
// AWS_CA_BUNDLE, as there, makes the clients trust only the bundle's certificates; a file that
// cannot be read or holds no PEM certificate is an error. What needs the shared config files or
// another credential provider is refused, naming the variable, rather than ignored: AWS_PROFILE
// and, without static keys, AWS_WEB_IDENTITY_TOKEN_FILE or
// AWS_CONTAINER_CREDENTIALS_FULL_URI/RELATIVE_URI; no credentials at all is an error too.
// AWS_DEFAULTS_MODE=auto takes no region from instance metadata (a Lambda has none).
func FromEnvironment(o Options) (aws.Config, error) {
	env, err := config.NewEnvConfig()
	if err != nil {
		return aws.Config{}, fmt.Errorf("AWS settings in the environment: %w", err)
	}
	if env.SharedConfigProfile != "" {
		return aws.Config{}, fmt.Errorf("AWS_PROFILE %q: a profile lives in the shared config files, which this build does not read; set the settings themselves in the environment", env.SharedConfigProfile)
	}
	cfg := aws.Config{
		Region:                      env.Region,
		Logger:                      logging.NewStandardLogger(os.Stderr),
		ConfigSources:               []any{env},
		AppID:                       env.AppID,
		DefaultsMode:                aws.DefaultsModeLegacy,
		RequestMinCompressSizeBytes: defaultRequestMinCompressSizeBytes,
		AccountIDEndpointMode:       aws.AccountIDEndpointModePreferred,
		RequestChecksumCalculation:  aws.RequestChecksumCalculationWhenSupported,
		ResponseChecksumValidation:  aws.ResponseChecksumValidationWhenSupported,
		AuthSchemePreference:        env.AuthSchemePreference,
		RestrictFilePermissions:     aws.RestrictFilePermissionsUserReadWrite,
	}
	if o.Region != "" {
		cfg.Region = o.Region
	}
	if env.CustomCABundle != "" {
		if cfg.HTTPClient, err = caBundleClient(env.CustomCABundle); err != nil {
			return aws.Config{}, err
		}
	}
	if o.Retryer != nil {
		cfg.Retryer = o.Retryer
	} else {
		cfg.RetryMaxAttempts, cfg.RetryMode = env.RetryMaxAttempts, env.RetryMode
	}
	if env.DefaultsMode != "" {
		cfg.DefaultsMode = env.DefaultsMode
	}
	if cfg.DefaultsMode == aws.DefaultsModeAuto {
		cfg.RuntimeEnvironment = aws.RuntimeEnvironment{EnvironmentIdentifier: aws.ExecutionEnvironmentID(os.Getenv("AWS_EXECUTION_ENV")),
			Region: env.Region}
	}
	if env.IgnoreConfiguredEndpoints == nil || !*env.IgnoreConfiguredEndpoints {
		if env.BaseEndpoint != "" {
			cfg.BaseEndpoint = aws.String(env.BaseEndpoint)
		}
	}
	if env.DisableRequestCompression != nil {
		cfg.DisableRequestCompression = *env.DisableRequestCompression
	}
	if env.DisableClockSkewCorrection != nil {
		cfg.DisableClockSkewCorrection = *env.DisableClockSkewCorrection
	}
	if env.RequestMinCompressSizeBytes != nil {
		cfg.RequestMinCompressSizeBytes = *env.RequestMinCompressSizeBytes
	}
	if env.AccountIDEndpointMode != "" {
		cfg.AccountIDEndpointMode = env.AccountIDEndpointMode
	}
	if env.RequestChecksumCalculation > 0 {
		cfg.RequestChecksumCalculation = env.RequestChecksumCalculation
	}
	if env.ResponseChecksumValidation > 0 {
		cfg.ResponseChecksumValidation = env.ResponseChecksumValidation
	}
	if env.RestrictFilePermissions != "" {
		cfg.RestrictFilePermissions = env.RestrictFilePermissions
	}
	creds := o.Credentials
	switch {
	case creds != nil:
	case env.Credentials.HasKeys():
		creds = credentials.StaticCredentialsProvider{Value: env.Credentials, Source: []aws.CredentialSource{aws.CredentialSourceEnvVars}}
	case env.WebIdentityTokenFilePath != "":
		return aws.Config{}, errors.New("AWS_WEB_IDENTITY_TOKEN_FILE is set without AWS_ACCESS_KEY_ID: this build takes credentials only from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, which Lambda sets from the execution role")
	case env.ContainerCredentialsEndpoint != "" || env.ContainerCredentialsRelativePath != "":
		return aws.Config{}, errors.New("AWS_CONTAINER_CREDENTIALS_FULL_URI or _RELATIVE_URI is set without AWS_ACCESS_KEY_ID: this build takes credentials only from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, which Lambda sets from the execution role")
	default:
		return aws.Config{}, errors.New("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY: not set; this build takes credentials only from them, which Lambda sets from the execution role")
	}
	if _, cached := creds.(*aws.CredentialsCache); !cached {
		creds = aws.NewCredentialsCache(creds)
	}
	cfg.Credentials = creds
	return cfg, nil
}

// caBundleClient is the SDK's default HTTP client trusting only the PEM certificates of the file
// at path (AWS_CA_BUNDLE).
func caBundleClient(path string) (*awshttp.BuildableClient, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("AWS_CA_BUNDLE: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("AWS_CA_BUNDLE %q: no PEM certificate in the file", path)
	}
	return awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		if tr.TLSClientConfig == nil {
			tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		tr.TLSClientConfig.RootCAs = roots
	}), nil
}
