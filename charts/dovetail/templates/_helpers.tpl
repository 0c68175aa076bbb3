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

{{/* Fails the render when a value the schema cannot express is wrong. */}}
{{- define "dovetail.validate" -}}
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
{{- end -}}
