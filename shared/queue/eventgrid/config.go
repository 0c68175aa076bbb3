package eventgrid

import (
	"errors"
	"fmt"
	"os"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/eventgrid/azeventgrid"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/eventgrid/aznamespaces"

	"github.com/dovetail-dev/dovetail/shared/queue"
)

// Environment variables of shared access keys, read only from the environment (never a flag, so
// no key shows in a process list). Deployments leave them unset and authenticate with Microsoft
// Entra ID (the function's user-assigned managed identity, the agent's workload identity); they
// serve local endpoints.
const (
	EnvTopicKey     = "DOVETAIL_EVENTGRID_TOPIC_KEY"
	EnvNamespaceKey = "DOVETAIL_EVENTGRID_NAMESPACE_KEY"
)

// Default names infra/azure gives the namespace topic of commands and the agent's subscription.
const (
	DefaultCommandsTopic        = "commands"
	DefaultCommandsSubscription = "agent"
)

// Config says where one cluster's topics are.
type Config struct {
	Cluster string
	// EventsTopicEndpoint is the custom topic of the agent's events
	// ("https://<topic>.<region>-1.eventgrid.azure.net/api/events"); empty: none routed.
	EventsTopicEndpoint string
	// NoticesTopicEndpoint is the custom topic of cloud notices the cluster side publishes
	// (Scheduled Events documents, agent/scheduledevents); empty: none routed.
	NoticesTopicEndpoint string
	// NamespaceEndpoint is the namespace of the commands topic
	// ("https://<namespace>.<region>-1.eventgrid.azure.net"); empty: none routed.
	NamespaceEndpoint string
	// CommandsTopic and CommandsSubscription default to DefaultCommandsTopic and
	// DefaultCommandsSubscription.
	CommandsTopic, CommandsSubscription string
	// Credential is used when the key variables are unset.
	Credential azcore.TokenCredential
	// ClientOptions are the SDK clients' (a test transport); zero is the default pipeline.
	ClientOptions azcore.ClientOptions
}

func (c Config) commands() (topic, sub string) {
	topic, sub = c.CommandsTopic, c.CommandsSubscription
	if topic == "" {
		topic = DefaultCommandsTopic
	}
	if sub == "" {
		sub = DefaultCommandsSubscription
	}
	return topic, sub
}

// Publisher routes queue.EventsSubject(cluster) to the events topic,
// queue.NoticesSubject(cluster) to the notices topic and queue.CommandsSubject(cluster) to the
// commands namespace topic, for those configured.
func (c Config) Publisher() (*Publisher, error) {
	p := &Publisher{Topics: map[string]TopicAPI{}, Namespaces: map[string]SenderAPI{}}
	for subject, endpoint := range map[string]string{queue.EventsSubject(c.Cluster): c.EventsTopicEndpoint, queue.NoticesSubject(c.Cluster): c.NoticesTopicEndpoint} {
		if endpoint == "" {
			continue
		}
		t, err := c.topicClient(endpoint)
		if err != nil {
			return nil, err
		}
		p.Topics[subject] = t
	}
	if c.NamespaceEndpoint != "" {
		topic, _ := c.commands()
		var (
			s   *aznamespaces.SenderClient
			err error
		)
		o := &aznamespaces.SenderClientOptions{ClientOptions: c.ClientOptions}
		if key := os.Getenv(EnvNamespaceKey); key != "" {
			s, err = aznamespaces.NewSenderClientWithSharedKeyCredential(c.NamespaceEndpoint, topic, azcore.NewKeyCredential(key), o)
		} else if c.Credential != nil {
			s, err = aznamespaces.NewSenderClient(c.NamespaceEndpoint, topic, c.Credential, o)
		} else {
			err = fmt.Errorf("no credential: %s unset and no Microsoft Entra credential", EnvNamespaceKey)
		}
		if err != nil {
			return nil, fmt.Errorf("event grid namespace %s topic %s: %w", c.NamespaceEndpoint, topic, err)
		}
		p.Namespaces[queue.CommandsSubject(c.Cluster)] = s
	}
	return p, nil
}

// topicClient is a custom topic's publisher client: the shared key of EnvTopicKey when set,
// else the Microsoft Entra credential.
func (c Config) topicClient(endpoint string) (*azeventgrid.Client, error) {
	var (
		t   *azeventgrid.Client
		err error
	)
	o := &azeventgrid.ClientOptions{ClientOptions: c.ClientOptions}
	if key := os.Getenv(EnvTopicKey); key != "" {
		t, err = azeventgrid.NewClientWithSharedKeyCredential(endpoint, azcore.NewKeyCredential(key), o)
	} else if c.Credential != nil {
		t, err = azeventgrid.NewClient(endpoint, c.Credential, o)
	} else {
		err = fmt.Errorf("no credential: %s unset and no Microsoft Entra credential", EnvTopicKey)
	}
	if err != nil {
		return nil, fmt.Errorf("event grid topic %s: %w", endpoint, err)
	}
	return t, nil
}

// Receiver is the agent's pull client of the commands subscription.
func (c Config) Receiver() (*aznamespaces.ReceiverClient, error) {
	if c.NamespaceEndpoint == "" {
		return nil, errors.New("event grid namespace endpoint: required to receive commands")
	}
	topic, sub := c.commands()
	o := &aznamespaces.ReceiverClientOptions{ClientOptions: c.ClientOptions}
	if key := os.Getenv(EnvNamespaceKey); key != "" {
		return aznamespaces.NewReceiverClientWithSharedKeyCredential(c.NamespaceEndpoint, topic, sub, azcore.NewKeyCredential(key), o)
	}
	if c.Credential == nil {
		return nil, fmt.Errorf("event grid namespace %s: no credential: %s unset and no Microsoft Entra credential", c.NamespaceEndpoint, EnvNamespaceKey)
	}
	return aznamespaces.NewReceiverClient(c.NamespaceEndpoint, topic, sub, c.Credential, o)
}
