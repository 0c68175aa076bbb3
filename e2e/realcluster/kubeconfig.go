package realcluster

import (
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

// restConfig is the client configuration of a rendered kubeconfig.
func restConfig(data []byte) (*rest.Config, error) {
	return clientcmd.RESTConfigFromKubeConfig(data)
}
