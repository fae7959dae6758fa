#!/bin/sh
# kafka-run-class.sh of the Kafka distribution, reduced: a main class on the jars of /opt/kafka/libs.
set -eu
main="$1"
shift
exec java ${KAFKA_HEAP_OPTS:--Xmx256M} ${KAFKA_JVM_PERFORMANCE_OPTS:--XX:+UseG1GC -XX:MaxGCPauseMillis=20} \
    -Dlog4j2.configurationFile="${KAFKA_LOG4J_CONFIG:-/opt/kafka/config/log4j2.yaml}" \
    ${KAFKA_OPTS:-} -cp '/opt/kafka/libs/*' "$main" "$@"
