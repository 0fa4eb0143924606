{{/*
The chart's name, truncated to 63 characters (a DNS label).
*/}}
{{- define "clawgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The release's full name: RELEASE-clawgate, or RELEASE when it already
contains the chart's name.
*/}}
{{- define "clawgate.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The admin Service's name (56 characters of the full name + "-admin").
*/}}
{{- define "clawgate.adminServiceName" -}}
{{- printf "%s-admin" (include "clawgate.fullname" . | trunc 57 | trimSuffix "-") }}
{{- end }}

{{- define "clawgate.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Standard labels (https://kubernetes.io/docs/concepts/overview/working-with-objects/common-labels/).
*/}}
{{- define "clawgate.labels" -}}
helm.sh/chart: {{ include "clawgate.chart" . }}
{{ include "clawgate.selectorLabels" . }}
app.kubernetes.io/version: {{ include "clawgate.imageTag" . | trunc 63 | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: clawgate
{{- end }}

{{/*
Selector labels: the pods of this release. Never change them in an upgrade
(a Deployment's selector is immutable).
*/}}
{{- define "clawgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "clawgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "clawgate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "clawgate.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "clawgate.imageTag" -}}
{{- .Values.image.tag | default .Chart.AppVersion | toString }}
{{- end }}

{{- define "clawgate.image" -}}
{{- $ref := printf "%s:%s" .Values.image.repository (include "clawgate.imageTag" .) }}
{{- if .Values.image.digest }}
{{- $ref = printf "%s@%s" $ref .Values.image.digest }}
{{- end }}
{{- $ref }}
{{- end }}

{{/*
The admin token Secret: required, with a message saying why.
*/}}
{{- define "clawgate.adminTokenSecret" -}}
{{- required "adminToken.existingSecret is required: clawgate's admin listener must listen on 0.0.0.0 in the pod (kubelet probes, Prometheus), which clawgate refuses without an admin token. Create a Secret with the token (kubectl create secret generic clawgate --from-literal=admin-token=$(openssl rand -hex 32)) and set --set adminToken.existingSecret=clawgate" .Values.adminToken.existingSecret }}
{{- end }}

{{/*
The config value parsed, failing the render when it is not YAML.
*/}}
{{- define "clawgate.parsedConfig" -}}
{{- $cfg := fromYaml (required "config is required: the gateway.yaml clawgate runs with" .Values.config) }}
{{- if hasKey $cfg "Error" }}
{{- fail (printf "config is not valid YAML: %s" (get $cfg "Error")) }}
{{- end }}
{{- toJson $cfg }}
{{- end }}

{{/*
The variable holding the admin token: the config's admin.token_env, else
clawgate's default CLAWGATE_ADMIN_TOKEN.
*/}}
{{- define "clawgate.adminTokenEnv" -}}
{{- $cfg := include "clawgate.parsedConfig" . | fromJson }}
{{- $admin := get $cfg "admin" | default dict }}
{{- if hasKey $admin "token_env" }}
{{- if not $admin.token_env }}
{{- fail "config: admin.token_env is empty, so clawgate would have no admin token and refuse admin.listen on 0.0.0.0; remove it (default CLAWGATE_ADMIN_TOKEN) or name a variable" }}
{{- end }}
{{- $admin.token_env }}
{{- else }}
{{- "CLAWGATE_ADMIN_TOKEN" }}
{{- end }}
{{- end }}

{{/*
Checks that the config fits the pod: admin.listen off loopback on
ports.admin, listen on ports.http. Addresses built from ${VAR} are not
checked.
*/}}
{{- define "clawgate.validateConfig" -}}
{{- $cfg := include "clawgate.parsedConfig" . | fromJson }}
{{- $admin := get $cfg "admin" | default dict }}
{{- $alisten := toString (get $admin "listen" | default "127.0.0.1:9090") }}
{{- if not (contains "${" $alisten) }}
{{- $host := regexReplaceAll ":[^:]*$" $alisten "" | trimPrefix "[" | trimSuffix "]" }}
{{- $port := regexFind "[^:]*$" $alisten }}
{{- if or (eq $host "localhost" "::1") (hasPrefix "127." $host) }}
{{- fail (printf "config: admin.listen %q is loopback: the kubelet's probes and Prometheus cannot reach it. Use \"0.0.0.0:%v\" (the admin token is required for it, see adminToken)" $alisten .Values.ports.admin) }}
{{- end }}
{{- if ne $port (toString .Values.ports.admin) }}
{{- fail (printf "config: admin.listen %q does not listen on ports.admin (%v)" $alisten .Values.ports.admin) }}
{{- end }}
{{- end }}
{{- $listen := toString (get $cfg "listen" | default ":8080") }}
{{- if not (contains "${" $listen) }}
{{- $port := regexFind "[^:]*$" $listen }}
{{- if ne $port (toString .Values.ports.http) }}
{{- fail (printf "config: listen %q does not listen on ports.http (%v)" $listen .Values.ports.http) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
terminationGracePeriodSeconds: above serve -grace plus the preStop sleep.
*/}}
{{- define "clawgate.terminationGracePeriod" -}}
{{- $floor := add (int .Values.graceSeconds) (include "clawgate.preStopSleep" . | int) }}
{{- if .Values.terminationGracePeriodSeconds }}
{{- if le (int .Values.terminationGracePeriodSeconds) $floor }}
{{- fail (printf "terminationGracePeriodSeconds (%v) must be above graceSeconds + preStopSleepSeconds (%v): the kubelet would kill clawgate before it finishes the deliveries in flight and releases their locks" .Values.terminationGracePeriodSeconds $floor) }}
{{- end }}
{{- int .Values.terminationGracePeriodSeconds }}
{{- else }}
{{- add $floor 10 }}
{{- end }}
{{- end }}

{{/*
The preStop sleep actually rendered: 0 before Kubernetes 1.30.
*/}}
{{- define "clawgate.preStopSleep" -}}
{{- if and (gt (int .Values.preStopSleepSeconds) 0) (semverCompare ">=1.30-0" .Capabilities.KubeVersion.Version) }}
{{- int .Values.preStopSleepSeconds }}
{{- else }}
{{- 0 }}
{{- end }}
{{- end }}

{{/*
The fewest replicas that run: autoscaling.minReplicas with the HPA, else
replicaCount.
*/}}
{{- define "clawgate.minReplicas" -}}
{{- if .Values.autoscaling.enabled }}
{{- int .Values.autoscaling.minReplicas }}
{{- else }}
{{- int .Values.replicaCount }}
{{- end }}
{{- end }}

{{/*
Checks the autoscaling values: 1 <= minReplicas <= maxReplicas, and a
metric to scale on.
*/}}
{{- define "clawgate.validateAutoscaling" -}}
{{- $a := .Values.autoscaling }}
{{- if lt (int $a.minReplicas) 1 }}
{{- fail (printf "autoscaling.minReplicas (%v) must be at least 1" $a.minReplicas) }}
{{- end }}
{{- if lt (int $a.maxReplicas) (int $a.minReplicas) }}
{{- fail (printf "autoscaling.maxReplicas (%v) must be at least autoscaling.minReplicas (%v)" $a.maxReplicas $a.minReplicas) }}
{{- end }}
{{- if not (or $a.targetCPUUtilizationPercentage $a.targetMemoryUtilizationPercentage) }}
{{- fail "autoscaling: set targetCPUUtilizationPercentage or targetMemoryUtilizationPercentage (the HPA needs a metric to scale on)" }}
{{- end }}
{{- end }}
