{{/* Chart name, overridable. */}}
{{- define "nimserve.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified app name: release-chart, at most 63 characters (a DNS label). */}}
{{- define "nimserve.fullname" -}}
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

{{- define "nimserve.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "nimserve.labels" -}}
helm.sh/chart: {{ include "nimserve.chart" . }}
{{ include "nimserve.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Labels that select the pods. */}}
{{- define "nimserve.selectorLabels" -}}
app.kubernetes.io/name: {{ include "nimserve.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The image: by digest when the build gave one, so pods run the gated bytes. */}}
{{- define "nimserve.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository .Values.image.tag }}
{{- end }}
{{- end }}

{{/* The entry of .Values.profiles this release serves (YAML; read with fromYaml). */}}
{{- define "nimserve.profile" -}}
{{- $want := .Values.profile | default .Values.defaultProfile }}
{{- $found := dict }}
{{- range .Values.profiles }}
{{- if or (eq (toString .name) (toString $want)) (eq (toString (default "" .id)) (toString $want)) }}
{{- $found = . }}
{{- end }}
{{- end }}
{{- if not $found }}
{{- fail (printf "profile %q is not one of the image's profiles" $want) }}
{{- end }}
{{- toYaml $found }}
{{- end }}

{{/* Startup probe periods: baseSeconds + memoryMiB / loadMiBPerSecond, rounded up to
     whole periods, so the budget grows with the model. */}}
{{- define "nimserve.startupFailureThreshold" -}}
{{- $p := include "nimserve.profile" . | fromYaml }}
{{- $s := .Values.probes.startup }}
{{- $seconds := add (int $s.baseSeconds) (div (int $p.memoryMiB) (max 1 (int $s.loadMiBPerSecond))) }}
{{- add 1 (div $seconds (max 1 (int $s.periodSeconds))) }}
{{- end }}

{{/* The model-cache claim's name. */}}
{{- define "nimserve.cacheClaim" -}}
{{- .Values.modelCache.existingClaim | default (printf "%s-cache" (include "nimserve.fullname" .)) }}
{{- end }}
