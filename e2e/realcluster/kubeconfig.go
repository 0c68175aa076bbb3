package realcluster

import (
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// kubeconfig renders a kubeconfig file with one cluster, one user and one context, the
// certificates inlined. Exactly one of kp (client certificate) and token is set.
func kubeconfig(server string, caPEM []byte, user string, kp *keyPair, token string) ([]byte, error) {
	auth := &clientcmdapi.AuthInfo{Token: token}
	if kp != nil {
		auth = &clientcmdapi.AuthInfo{ClientCertificateData: kp.CertPEM, ClientKeyData: kp.KeyPEM}
	}
	cfg := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"local": {Server: server, CertificateAuthorityData: caPEM}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{user: auth},
		Contexts:       map[string]*clientcmdapi.Context{user + "@local": {Cluster: "local", AuthInfo: user}},
		CurrentContext: user + "@local",
	}
	return clientcmd.Write(cfg)
}

// restConfig is the admin client configuration of a rendered kubeconfig. Its client-side rate
// limit is raised from client-go's 5 QPS (burst 10): applying a scenario of a few hundred objects
// to a private loopback API server should not wait on it. API warnings (deprecated fields in the
// scenario) are printed once each to stderr instead of on every request.
func restConfig(data []byte) (*rest.Config, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 100, 200
	cfg.WarningHandler = rest.NewWarningWriter(os.Stderr, rest.WarningWriterOptions{Deduplicate: true})
	return cfg, nil
}
