{{/* Names, labels and the values every template shares. */}}

{{- define "vgate.labels" -}}
app.kubernetes.io/name: vgate
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/part-of: vgate
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/* The release's name for its objects: the release name when it names vgate already (a release
called "vgate" gives "vgate", "vgate-report-writer"), else "<release>-vgate". Cluster-scoped objects
(the webhook configurations) carry it too, so two releases never collide. */}}
{{- define "vgate.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end }}

{{- define "vgate.selector" -}}
app.kubernetes.io/name: vgate
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "vgate.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end }}

{{/* The exempt namespaces: the value's list, the release's own namespace and, with cert-manager,
cert-manager's (it renews vgate's certificate: it must be able to start while vgate is down). */}}
{{- define "vgate.exempt" -}}
{{- $exempt := append .Values.exemptNamespaces .Release.Namespace -}}
{{- if .Values.certManager.enabled -}}
{{- $exempt = append $exempt .Values.certManager.namespace -}}
{{- end -}}
{{- $exempt | uniq | sortAlpha | toJson -}}
{{- end }}

{{- define "vgate.anchorClaim" -}}
{{- .Values.reportWriter.anchor.existingClaim | default (printf "%s-report-anchor" (include "vgate.fullname" .)) -}}
{{- end }}

{{- define "vgate.auditClaim" -}}
{{- .Values.audit.existingClaim | default (printf "%s-audit" (include "vgate.fullname" .)) -}}
{{- end }}

{{/* The gateway config: the `config` value, with what the chart decides written in. */}}
{{- define "vgate.config" -}}
{{- $config := deepCopy .Values.config -}}
{{- $_ := set $config "exemptNamespaces" (include "vgate.exempt" . | fromJsonArray) -}}
{{- $_ := set $config "cluster" (dict "watch" .Values.clusterState.enabled) -}}
{{- $_ := set $config "exceptions" (merge (dict "dir" "/etc/vgate/exceptions") (get $config "exceptions" | default dict)) -}}
{{- $_ := set $config "audit" (merge (dict "dir" "/app/audit") (get $config "audit" | default dict)) -}}
{{- $_ := set $config "reports" (merge (dict "dir" "/app/reports" "key" "/app/keys/report-ed25519.key" "anchorFile" "/app/anchor/reports-anchor.jsonl") (get $config "reports" | default dict)) -}}
{{- if .Values.reportWriter.applyPolicyReports -}}
{{- $_ := set $config.reports "policyReports" (dict "apply" true) -}}
{{- end -}}
{{- if .Values.mtls.clientCASecret -}}
{{- $_ := set $config "server" (merge (dict "clientCA" "/etc/vgate/client-ca/ca.crt") (get $config "server" | default dict)) -}}
{{- end -}}
{{- with .Values.audit.forward -}}
{{- if .url -}}
{{- $forward := dict "url" .url "maxMessageBytes" .maxMessageBytes -}}
{{- if .caSecret -}}{{- $_ := set $forward "caFile" "/etc/vgate/forward-ca/ca.crt" -}}{{- end -}}
{{- if .clientSecret -}}{{- $_ := set $forward "certFile" "/etc/vgate/forward-client/tls.crt" -}}{{- $_ := set $forward "keyFile" "/etc/vgate/forward-client/tls.key" -}}{{- end -}}
{{- $_ := set $config.audit "forward" $forward -}}
{{- end -}}
{{- end -}}
{{- toYaml $config -}}
{{- end }}

{{/* Both webhook configurations skip the exempt namespaces and those labelled vgate.io/exempt=true. */}}
{{- define "vgate.namespaceSelector" -}}
namespaceSelector:
  matchExpressions:
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values: {{ include "vgate.exempt" . }}
    - key: vgate.io/exempt
      operator: NotIn
      values: ["true"]
{{- end }}

{{- define "vgate.webhookClient" -}}
clientConfig:
  {{- if .root.Values.webhooks.url }}
  url: {{ printf "%s%s" (trimSuffix "/" .root.Values.webhooks.url) .path | quote }}
  {{- else }}
  service:
    name: {{ include "vgate.fullname" .root }}
    namespace: {{ .root.Release.Namespace }}
    path: {{ .path }}
    port: 443
  {{- end }}
  {{- if eq (include "vgate.tlsMode" .root) "given" }}
  caBundle: {{ .root.Values.tls.caBundle }}
  {{- end }}
{{- end }}

{{/* Who makes the serving certificate and puts its CA into the webhook configurations:
"given" (tls.caBundle: the operator, e.g. with `vgate certs`), "cert-manager", or "self" (the default:
vgate's pods keep it in tls.secretName and inject the CA, as Gatekeeper's cert-controller does). */}}
{{- define "vgate.tlsSecret" -}}
{{- .Values.tls.secretName | default (printf "%s-tls" (include "vgate.fullname" .)) -}}
{{- end }}

{{- define "vgate.tlsMode" -}}
{{- if .Values.certManager.enabled -}}cert-manager{{- else if .Values.tls.caBundle -}}given{{- else -}}self{{- end -}}
{{- end }}

{{- define "vgate.webhookAnnotations" -}}
{{- if .Values.certManager.enabled }}
annotations:
  cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/{{ include "vgate.fullname" $ }}-serving
{{- end }}
{{- end }}

{{/* A policy file's path as a ConfigMap key: "security-seccomp/policy.rego" -> "security-seccomp.policy.rego". */}}
{{- define "vgate.policyKey" -}}
{{- . | replace "/" "." -}}
{{- end }}

{{- define "vgate.policyFiles" -}}
{{- $files := dict -}}
{{- if .Values.policies.fromChart -}}
{{- range $path, $_ := .Files.Glob "policies/**.rego" -}}
{{- if not (hasSuffix "_test.rego" $path) -}}
{{- $_ := set $files (trimPrefix "policies/" $path) ($.Files.Get $path) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- range $path, $text := .Values.policies.extra -}}
{{- $_ := set $files $path $text -}}
{{- end -}}
{{- toJson $files -}}
{{- end }}

{{- define "vgate.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "vgate.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
{{- end }}

{{/* Where a pod of the release may run, and how it pulls its image: the gateway's and the writer's. */}}
{{- define "vgate.scheduling" -}}
{{- with .Values.nodeSelector }}
nodeSelector: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets: {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* The CEL matchConditions both webhooks carry, if any. */}}
{{- define "vgate.matchConditions" -}}
{{- with .Values.webhooks.matchConditions }}
matchConditions: {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* Read-only on every kind vgate judges and the cluster state its rules read: what `vgate audit scan`
lists (webhook/background/scan.py, from the kinds registry; tests/server/test_chart.py holds it). */}}
{{- define "vgate.readClusterRules" -}}
- apiGroups: [""]
  resources: [pods, namespaces, nodes, services, replicationcontrollers]
  verbs: [get, list]
- apiGroups: [""]
  resources: [configmaps]  # a SparkApplication's sparkConfigMap, read by name
  verbs: [get]
- apiGroups: [apps]
  resources: [deployments, statefulsets, daemonsets, replicasets]
  verbs: [get, list]
- apiGroups: [batch]
  resources: [jobs, cronjobs]
  verbs: [get, list]
- apiGroups: [batch.volcano.sh]
  resources: [jobs]
  verbs: [get, list]
- apiGroups: [scheduling.volcano.sh]
  resources: [podgroups, queues]
  verbs: [get, list]
- apiGroups: [scheduling.k8s.io]
  resources: [priorityclasses]
  verbs: [get, list]
- apiGroups: [sparkoperator.k8s.io]
  resources: [sparkapplications, scheduledsparkapplications]
  verbs: [get, list]
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies, ingresses]
  verbs: [get, list]
- apiGroups: [policy.networking.k8s.io]
  resources: [adminnetworkpolicies, baselineadminnetworkpolicies]
  verbs: [get, list]
{{- end }}

{{/* The forwarder's TLS material (audit.forward): mounts, then volumes, for the gateway and the report writer. */}}
{{- define "vgate.forwardMounts" -}}
{{- if .Values.audit.forward.caSecret }}
- name: forward-ca
  mountPath: /etc/vgate/forward-ca
  readOnly: true
{{- end }}
{{- if .Values.audit.forward.clientSecret }}
- name: forward-client
  mountPath: /etc/vgate/forward-client
  readOnly: true
{{- end }}
{{- end }}

{{- define "vgate.forwardVolumes" -}}
{{- if .Values.audit.forward.caSecret }}
- name: forward-ca
  secret:
    secretName: {{ .Values.audit.forward.caSecret }}
{{- end }}
{{- if .Values.audit.forward.clientSecret }}
- name: forward-client
  secret:
    secretName: {{ .Values.audit.forward.clientSecret }}
    defaultMode: 0440
{{- end }}
{{- end }}
