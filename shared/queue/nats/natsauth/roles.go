// Package natsauth says who may do what on Dovetail's NATS server and how a client proves who it
// is: the roles, each role's permissions (one table, from which the embedded server of local dev
// and tests is configured and against which the Helm chart's server config is tested), and the
// client's credential and TLS settings with their flags. It imports no NATS package, so a Lambda
// bootstrap, which registers the same flags, links no NATS client
// (functions.TestLambdaBootstrapsLinkNoNATSServer).
package natsauth

import (
	"fmt"
	"regexp"
)

// Role is what a NATS client of a cluster is allowed to do.
type Role string

// The roles. Each component connects with its role's credentials and nothing more.
const (
	// RoleAgent publishes events (pending pods, snapshots) and consumes commands through its
	// durable "agent"; it may create or update the cluster's stream (--ensure-stream).
	RoleAgent Role = "agent"
	// RoleFunction consumes the subjects of the functions' durables (FunctionDurables), follows
	// the events subject (the interruption function's latest snapshot), publishes commands,
	// dead letters and decision audit records; it may create or update the cluster's stream.
	RoleFunction Role = "function"
	// RoleScheduledEvents (the Azure Scheduled Events DaemonSet) publishes notices, nothing else.
	RoleScheduledEvents Role = "scheduled-events"
	// RoleAudit (`dovetail audit --nats`) reads the audit subject, nothing else.
	RoleAudit Role = "audit"
)

// Roles lists every role, in the order docs/install.md's table and the chart's values use.
var Roles = []Role{RoleAgent, RoleFunction, RoleScheduledEvents, RoleAudit}

// AgentDurable is the agent's durable consumer of the commands subject.
const AgentDurable = "agent"

// Durable is a function's durable consumer: its name and the subject (the last token of
// dovetail.<cluster>.<subject>) it reads.
type Durable struct {
	Name, Subject string
}

// FunctionDurables are the durables of the functions as NATS workers (runtime.Function Name and
// Subject of each functions/<name>/cmd/<name>/main.go). A durable missing here is refused by
// the server: the function role may create and read only these.
var FunctionDurables = []Durable{
	{"provision", "events"},
	{"consolidate", "events"},
	{"drift", "events"},
	{"lifecycle", "events"},
	{"interruption", "notices"},
}

// SubjectPermission is an allow list and a deny list of subjects; deny wins (nats-server
// authorization, "Authorization" in the NATS server configuration documentation).
type SubjectPermission struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// Permissions is one role's publish and subscribe permissions, the shape of a user's
// "permissions" block in nats-server's configuration.
type Permissions struct {
	Publish   SubjectPermission `json:"publish"`
	Subscribe SubjectPermission `json:"subscribe"`
}

var clusterRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

func checkCluster(cluster string) error {
	if len(cluster) > 63 || !clusterRE.MatchString(cluster) {
		return fmt.Errorf("cluster %q: must be an RFC 1123 label (lowercase alphanumerics and '-', at most 63)", cluster)
	}
	return nil
}

// InboxPrefix is where a role's clients receive replies (JetStream API responses, publish acks,
// pulled messages): "_INBOX.dovetail.<cluster>.<role>". A prefix per role, rather than NATS's
// shared "_INBOX", keeps one role from subscribing to the messages another role pulls (a
// DaemonSet reading the agent's commands).
func InboxPrefix(cluster string, role Role) string {
	return "_INBOX.dovetail." + cluster + "." + string(role)
}

// For returns role's permissions on cluster's subjects and stream (shared/queue's subject
// names, shared/queue/nats's stream "dovetail-<cluster>"). The JetStream API subjects are those
// the nats.go jetstream package requests (api.go of github.com/nats-io/nats.go/jetstream) for
// exactly the calls each component makes:
//
//   - EnsureStream: $JS.API.STREAM.INFO.<stream>, then STREAM.CREATE.<stream> if absent. Never
//     STREAM.UPDATE: an update to the stream's limits or subjects drops what it holds, so no
//     role may (an operator changes it with the server's administrator credentials).
//   - a durable pull consumer (NewConsumer, Consume): CONSUMER.CREATE.<stream>.<durable>.<filter
//     subject> (the server checks the filter token against the config), CONSUMER.MSG.NEXT.<stream>.
//     <durable>, and acks on $JS.ACK.<stream>.<durable>.>.
//   - an ordered consumer (Follow, ReadAudit): CONSUMER.CREATE.<stream>.<random name>.<filter>,
//     CONSUMER.INFO and CONSUMER.MSG.NEXT of that name. The name is random, so these are allowed
//     for any name and denied for the durables of other roles.
//
// No role may delete or purge the stream or delete a consumer.
func For(role Role, cluster string) (Permissions, error) {
	if err := checkCluster(cluster); err != nil {
		return Permissions{}, err
	}
	stream := "dovetail-" + cluster
	subject := func(s string) string { return "dovetail." + cluster + "." + s }
	api := func(s string) string { return "$JS.API." + s }
	streamManagement := []string{api("STREAM.INFO." + stream), api("STREAM.CREATE." + stream)}
	durable := func(name, subj string) []string {
		return []string{
			api("CONSUMER.CREATE." + stream + "." + name + "." + subject(subj)),
			api("CONSUMER.MSG.NEXT." + stream + "." + name),
			"$JS.ACK." + stream + "." + name + ".>",
		}
	}
	// denyDurables keeps a role's any-name ordered-consumer grants off the durables of others:
	// re-creating one would change its filter, pulling from one would steal its messages.
	denyDurables := func(names ...string) []string {
		var d []string
		for _, n := range names {
			d = append(d, api("CONSUMER.CREATE."+stream+"."+n+".>"), api("CONSUMER.MSG.NEXT."+stream+"."+n))
		}
		return d
	}
	ordered := func(subj string) []string {
		return []string{
			api("CONSUMER.CREATE." + stream + ".*." + subject(subj)),
			api("CONSUMER.INFO." + stream + ".*"),
			api("CONSUMER.MSG.NEXT." + stream + ".*"),
		}
	}
	functionNames := make([]string, len(FunctionDurables))
	for i, d := range FunctionDurables {
		functionNames[i] = d.Name
	}
	inbox := SubjectPermission{Allow: []string{InboxPrefix(cluster, role) + ".>"}}

	var p Permissions
	switch role {
	case RoleAgent:
		p.Publish.Allow = append([]string{subject("events"), subject("dlq")}, streamManagement...)
		p.Publish.Allow = append(p.Publish.Allow, durable(AgentDurable, "commands")...)
	case RoleFunction:
		p.Publish.Allow = append([]string{subject("commands"), subject("dlq"), subject("audit")}, streamManagement...)
		for _, d := range FunctionDurables {
			p.Publish.Allow = append(p.Publish.Allow, durable(d.Name, d.Subject)...)
		}
		p.Publish.Allow = append(p.Publish.Allow, ordered("events")...)
		p.Publish.Deny = denyDurables(AgentDurable)
	case RoleScheduledEvents:
		p.Publish.Allow = []string{subject("notices")}
	case RoleAudit:
		p.Publish.Allow = ordered("audit")
		p.Publish.Deny = denyDurables(append([]string{AgentDurable}, functionNames...)...)
	default:
		return Permissions{}, fmt.Errorf("nats role %q: must be one of %v", role, Roles)
	}
	p.Subscribe = inbox
	return p, nil
}
