{{/* Names: the agent keeps rbac.yaml's names (dovetail-agent), other objects are prefixed by the release. */}}
{{- define "dovetail.fullname" -}}
{{- if contains "dovetail" .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-dovetail" .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "dovetail.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/part-of: dovetail
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{/* The agent's selector labels. */}}
{{- define "dovetail.agentSelector" -}}
app.kubernetes.io/name: dovetail-agent
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "dovetail.image" -}}
{{- printf "%s:%s" .image.repository (default .appVersion .image.tag) -}}
{{- end -}}

{{/* The NATS URL every client of the release connects to. */}}
{{- define "dovetail.natsURL" -}}
{{- if .Values.nats.url -}}
{{- .Values.nats.url -}}
{{- else -}}
{{- printf "nats://%s-nats.%s.svc:4222" (include "dovetail.fullname" .) .Release.Namespace -}}
{{- end -}}
{{- end -}}

{{/* The restricted Pod Security Standard's container settings (distroless images, user 65532). */}}
{{- define "dovetail.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/*
The functions whose FIFO event queues the agent publishes every event to with transport: sqs
(infra/aws: one queue each, output event_queue_urls), provision's first: the agent routes events
to its first --event-queue-url and fans them out to the rest (agent/cmd/agent sqsTransport).
*/}}
{{- define "dovetail.sqsFunctions" -}}
provision consolidate drift interruption lifecycle
{{- end -}}

{{/*
Fails the render, naming the value and the fix, when a required value is missing or a value the
schema cannot express is wrong. Required values are checked here rather than by schema if/then
rules, whose only message is "'allOf' failed".
*/}}
{{- define "dovetail.validate" -}}
{{- if not .Values.clusterName -}}
{{- fail "clusterName: required: the cluster's name, as the functions were deployed with it (infra/aws or infra/azure variable cluster_name); --set clusterName=<name>" -}}
{{- end -}}
{{- if eq .Values.transport "sqs" -}}
{{- $urls := .Values.sqs.eventQueueURLs -}}
{{- if not (kindIs "map" $urls) -}}
{{- fail (printf `sqs.eventQueueURLs: a map from function name (%s) to its FIFO event queue URL, not a %s: --set-json "sqs.eventQueueURLs=$(terraform output -json event_queue_urls)" (infra/aws/terraform)` (include "dovetail.sqsFunctions" . | splitList " " | join ", ") (get (dict "slice" "list" "invalid" "null") (kindOf $urls) | default (kindOf $urls))) -}}
{{- end -}}
{{- range include "dovetail.sqsFunctions" . | splitList " " -}}
{{- if not (index $urls .) -}}
{{- fail (printf "sqs.eventQueueURLs.%s: required with transport: sqs: the %s function's FIFO event queue URL (infra/aws/terraform output event_queue_urls.%s); every function needs its own queue, since an SQS message reaches one consumer" . . .) -}}
{{- end -}}
{{- end -}}
{{- if not .Values.sqs.commandQueueURL -}}
{{- fail "sqs.commandQueueURL: required with transport: sqs: the FIFO queue the agent receives commands from (infra/aws/terraform output command_queue_url)" -}}
{{- end -}}
{{- end -}}
{{- if eq .Values.transport "eventgrid" -}}
{{- if not .Values.eventgrid.topicEndpoint -}}
{{- fail "eventgrid.topicEndpoint: required with transport: eventgrid: the custom topic the agent publishes events to (infra/azure output agent_flags, --eventgrid-topic-endpoint)" -}}
{{- end -}}
{{- if not .Values.eventgrid.namespaceEndpoint -}}
{{- fail "eventgrid.namespaceEndpoint: required with transport: eventgrid: the Event Grid namespace of the commands topic (infra/azure output agent_flags, --eventgrid-namespace-endpoint)" -}}
{{- end -}}
{{- end -}}
{{- if and (eq .Values.identity.type "irsa") (not .Values.identity.irsa.roleARN) -}}
{{- fail "identity.irsa.roleARN: required with identity.type: irsa: the ARN of a role with the agent role's permissions that trusts the cluster's OIDC provider (or use identity.type: podIdentity with infra/aws's agent_role_arn)" -}}
{{- end -}}
{{- if and (eq .Values.identity.type "azureWorkloadIdentity") (not .Values.identity.azureWorkloadIdentity.clientID) -}}
{{- fail "identity.azureWorkloadIdentity.clientID: required with identity.type: azureWorkloadIdentity: the agent's managed identity client ID (infra/azure output agent_client_id)" -}}
{{- end -}}
{{- if and (ne .Values.transport "nats") .Values.workers.enabled -}}
{{- fail (printf "workers.enabled: the functions run as NATS workers only with transport: nats (transport is %s: they run on %s)" .Values.transport (ternary "Lambda (infra/aws)" "Azure Functions (infra/azure)" (eq .Values.transport "sqs"))) -}}
{{- end -}}
{{- if and (eq .Values.transport "sqs") .Values.scheduledEvents.enabled -}}
{{- fail "scheduledEvents.enabled: Azure Scheduled Events are published over nats or eventgrid, and transport is sqs" -}}
{{- end -}}
{{- if and (eq .Values.transport "eventgrid") .Values.scheduledEvents.enabled (not .Values.eventgrid.noticesTopicEndpoint) -}}
{{- fail "eventgrid.noticesTopicEndpoint: required with scheduledEvents.enabled and transport eventgrid (infra/azure output notices_topic_endpoint)" -}}
{{- end -}}
{{- if and .Values.scheduledEvents.enabled .Values.nats.server.enabled .Values.nats.server.networkPolicy (not .Values.nats.server.clientCIDRs) -}}
{{- fail "nats.server.clientCIDRs: the Scheduled Events DaemonSet runs on the host network, so the NATS NetworkPolicy must allow the nodes' CIDRs (or set nats.server.networkPolicy: false)" -}}
{{- end -}}
{{- if and (eq .Values.transport "nats") (not .Values.nats.url) (not .Values.nats.server.enabled) -}}
{{- fail "nats.url: required with transport: nats unless nats.server.enabled (the bundled NATS server)" -}}
{{- end -}}
{{- if and (eq .Values.transport "nats") (not .Values.nats.insecureNoAuth) -}}
{{- $a := .Values.nats.auth -}}
{{- $need := list "agent" -}}
{{- if .Values.workers.enabled }}{{ $need = append $need "function" }}{{ end -}}
{{- if .Values.scheduledEvents.enabled }}{{ $need = append $need "scheduledEvents" }}{{ end -}}
{{- range $need -}}
{{- if not (index $a .).secretName -}}
{{- fail (printf "nats.auth.%s.secretName: required with transport: nats: the Secret holding the %s's NATS credentials (key %q; or set nats.insecureNoAuth: true, which lets any pod that reaches the server publish commands)" . . (ternary "creds" "nkey" (eq $a.type "creds"))) -}}
{{- end -}}
{{- if and $.Values.nats.server.enabled (not (index $a .).publicKey) -}}
{{- fail (printf "nats.auth.%s.publicKey: required with nats.server.enabled: the nkey user public key (U..., from nk -inkey seed -pubout) the bundled server admits the %s by" . .) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.nats.server.enabled (eq $a.type "creds") -}}
{{- fail "nats.auth.type: creds needs a server in decentralized JWT mode (nsc); the bundled server (nats.server.enabled) admits nkey users: set nats.auth.type: nkey" -}}
{{- end -}}
{{- if and .Values.nats.server.enabled (not .Values.nats.tls.secretName) -}}
{{- fail "nats.tls.secretName: required with nats.server.enabled: the Secret with the server's tls.crt, tls.key and ca.crt (a cert-manager Certificate makes one), so credentials and commands never cross the network in clear" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The bundled NATS server's configuration (the ConfigMap's nats.conf; its checksum rolls the pod). */}}
{{- define "dovetail.natsConf" -}}
server_name: $POD_NAME
listen: 0.0.0.0:4222
http: 0.0.0.0:8222
jetstream {
  store_dir: /data/jetstream
  max_file_store: {{ int64 .Values.nats.server.maxFileStore }}
  max_memory_store: 0
}
{{- if .Values.nats.tls.secretName }}
# TLS only: clients verify this certificate with the Secret's ca.crt.
tls {
  cert_file: /etc/nats-tls/tls.crt
  key_file: /etc/nats-tls/tls.key
  timeout: 2
}
{{- end }}
{{- if not .Values.nats.insecureNoAuth }}
# One nkey user per role (the public keys; the seeds stay in the roles' Secrets), each with its
# role's permissions (shared/queue/nats/natsauth.For).
authorization {
  users: [
{{- $cluster := .Values.clusterName }}
{{- range $key, $role := dict "agent" "agent" "function" "function" "scheduledEvents" "scheduled-events" "audit" "audit" }}
{{- with (index $.Values.nats.auth $key).publicKey }}
    {nkey: {{ . | quote }}, permissions: {{ include "dovetail.natsPermissions" (dict "role" $role "cluster" $cluster) }}}
{{- end }}
{{- end }}
  ]
}
{{- end }}
{{- end -}}

{{/*
NATS client credentials and TLS of one role's pods (dict "root" $ "role" "agent" | "function" |
"scheduledEvents"): the flags (natsauth.Client), the read-only mounts and the Secret volumes. The
role's Secret (nats.auth.<role>.secretName) holds key "nkey" (an nkey user seed) or "creds" (a
user credentials file), by nats.auth.type; the CA Secret's ca.crt verifies the server.
*/}}
{{- define "dovetail.natsCASecret" -}}
{{- default .Values.nats.tls.secretName .Values.nats.tls.caSecretName -}}
{{- end -}}

{{- define "dovetail.natsClientArgs" -}}
{{- $v := .root.Values.nats -}}
{{- if $v.insecureNoAuth }}
- --nats-insecure-no-auth=true
{{- else }}
{{- if eq $v.auth.type "creds" }}
- --nats-creds=/etc/dovetail/nats/credentials/creds
{{- else }}
- --nats-nkey-seed=/etc/dovetail/nats/credentials/nkey
{{- end }}
{{- end }}
{{- if include "dovetail.natsCASecret" .root }}
- --nats-tls-ca=/etc/dovetail/nats/tls/ca.crt
{{- end }}
{{- end -}}

{{- define "dovetail.natsClientMounts" -}}
{{- if not .root.Values.nats.insecureNoAuth }}
- name: nats-credentials
  mountPath: /etc/dovetail/nats/credentials
  readOnly: true
{{- end }}
{{- if include "dovetail.natsCASecret" .root }}
- name: nats-tls-ca
  mountPath: /etc/dovetail/nats/tls
  readOnly: true
{{- end }}
{{- end -}}

{{- define "dovetail.natsClientVolumes" -}}
{{- $v := .root.Values.nats -}}
{{- if not $v.insecureNoAuth }}
- name: nats-credentials
  secret:
    secretName: {{ (index $v.auth .role).secretName }}
    defaultMode: 0440
    items:
      - key: {{ ternary "creds" "nkey" (eq $v.auth.type "creds") }}
        path: {{ ternary "creds" "nkey" (eq $v.auth.type "creds") }}
{{- end }}
{{- with include "dovetail.natsCASecret" .root }}
- name: nats-tls-ca
  secret:
    secretName: {{ . }}
    defaultMode: 0444
    items:
      - key: ca.crt
        path: ca.crt
{{- end }}
{{- end -}}

{{/*
One role's permissions on the bundled server, as nats.conf JSON (dict "role" "agent" | "function" |
"scheduled-events" | "audit" "cluster" .Values.clusterName). It spells
shared/queue/nats/natsauth.For; charts' TestNATSShape keeps the two equal.
*/}}
{{- define "dovetail.natsPermissions" -}}
{{- $stream := printf "dovetail-%s" .cluster -}}
{{- $subj := printf "dovetail.%s." .cluster -}}
{{- $api := "$JS.API." -}}
{{- $mgmt := list (printf "%sSTREAM.INFO.%s" $api $stream) (printf "%sSTREAM.CREATE.%s" $api $stream) -}}
{{- /* natsauth.FunctionDurables: name and subject of each function's durable consumer. */ -}}
{{- $functions := list (list "provision" "events") (list "consolidate" "events") (list "drift" "events") (list "lifecycle" "events") (list "interruption" "notices") -}}
{{- $allow := list -}}
{{- $deny := list -}}
{{- if eq .role "agent" -}}
{{- $allow = concat (list (print $subj "events") (print $subj "dlq")) $mgmt -}}
{{- $allow = concat $allow (list (printf "%sCONSUMER.CREATE.%s.agent.%scommands" $api $stream $subj) (printf "%sCONSUMER.MSG.NEXT.%s.agent" $api $stream) (printf "$JS.ACK.%s.agent.>" $stream)) -}}
{{- else if eq .role "function" -}}
{{- $allow = concat (list (print $subj "commands") (print $subj "dlq") (print $subj "audit")) $mgmt -}}
{{- range $functions -}}
{{- $allow = concat $allow (list (printf "%sCONSUMER.CREATE.%s.%s.%s%s" $api $stream (index . 0) $subj (index . 1)) (printf "%sCONSUMER.MSG.NEXT.%s.%s" $api $stream (index . 0)) (printf "$JS.ACK.%s.%s.>" $stream (index . 0))) -}}
{{- end -}}
{{- $allow = concat $allow (list (printf "%sCONSUMER.CREATE.%s.*.%sevents" $api $stream $subj) (printf "%sCONSUMER.INFO.%s.*" $api $stream) (printf "%sCONSUMER.MSG.NEXT.%s.*" $api $stream)) -}}
{{- $deny = list (printf "%sCONSUMER.CREATE.%s.agent.>" $api $stream) (printf "%sCONSUMER.MSG.NEXT.%s.agent" $api $stream) -}}
{{- else if eq .role "scheduled-events" -}}
{{- $allow = list (print $subj "notices") -}}
{{- else if eq .role "audit" -}}
{{- $allow = list (printf "%sCONSUMER.CREATE.%s.*.%saudit" $api $stream $subj) (printf "%sCONSUMER.INFO.%s.*" $api $stream) (printf "%sCONSUMER.MSG.NEXT.%s.*" $api $stream) -}}
{{- range prepend (list "provision" "consolidate" "drift" "lifecycle" "interruption") "agent" -}}
{{- $deny = concat $deny (list (printf "%sCONSUMER.CREATE.%s.%s.>" $api $stream .) (printf "%sCONSUMER.MSG.NEXT.%s.%s" $api $stream .)) -}}
{{- end -}}
{{- else -}}
{{- fail (printf "dovetail.natsPermissions: unknown role %q" .role) -}}
{{- end -}}
{{- $pub := dict "allow" $allow -}}
{{- if $deny }}{{ $_ := set $pub "deny" $deny }}{{ end -}}
{{- dict "publish" $pub "subscribe" (dict "allow" (list (printf "_INBOX.dovetail.%s.%s.>" .cluster .role))) | toRawJson -}}
{{- end -}}
