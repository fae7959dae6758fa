"""A real Schema Registry for floe's registry mode (its client is `ingest.registry_client`).

The registry is Apicurio Registry, run from Maven Central artifacts only and kept in memory (its
embedded in-memory H2 store: nothing to install, nothing persisted). floe talks to it through its
Confluent-compatible API, `http://127.0.0.1:<port>/apis/ccompat/v7`, which is what registry mode (and
any Confluent serializer) expects. Used by `floe dev schema-registry`, the tests and the quick start.

Why Apicurio 2.4.2.Final (checked on Maven Central):
- 3.x: `apicurio-registry-app` 3.3.3 is compiled for Java 21; the 3.0.9 and 3.3.2 POMs name a parent
  POM Maven Central does not have, so their dependencies cannot be resolved. No 3.x runs on Java 17.
- 2.5.x and 2.6.x need Apicurio modules that were never published there (`apicurio-registry-utils-kafka`,
  `apicurio-common-app-components-*`). 2.4.2.Final is the newest whose dependencies all are, with two
  substitutions: `com.github.erosb:everit-json-schema` (the same `org.everit.json.schema` classes) for
  the jitpack-only `com.github.everit-org.json-schema`, and the config-index extension's deployment jar
  at 0.1.10.Final (identical build step) as 0.1.18.Final's is missing.
- No version ships the Quarkus `-runner.jar` there (only GitHub releases do); the published app jar is
  the plain, not yet "augmented" Quarkus application.

So floe does Quarkus's production build itself, once: the application model Quarkus's Maven plugin
computes for that jar (every dependency with its Quarkus flags) is pinned below by SHA-1, fetched into
floe's jar cache (`ingest.artifacts`), and handed to Quarkus's bootstrap API by a small Java program
(`_AUGMENT_SOURCE`, run in the JVM's source-file mode, so the one-time build needs a JDK). The output
(Apicurio's own packaging: a runner jar and its lib/) is cached in `~/.cache/floe/apicurio`; every later
start is a plain `java -jar`. Neither Maven nor the network is needed after the first run.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import FrameType, TracebackType

import click
from rich.console import Console

from catalog.dev.postgres import free_port
from catalog.dev.processes import stop_process, wait_until_answering
from ingest.artifacts import Artifact, cache_dir, fetch
from ingest.java import find_java

APICURIO_VERSION = "2.4.2.Final"
QUARKUS_VERSION = "2.16.4.Final"
MINIMUM_JAVA = 17
CCOMPAT_PATH = "/apis/ccompat/v7"

APICURIO_APP = Artifact(
    "io.apicurio", "apicurio-registry-app", APICURIO_VERSION, "17239ca86e70b71ae6387f3881f1e722cec8f8b2"
)

# The Quarkus application model of apicurio-registry-app 2.4.2.Final, as quarkus-maven-plugin 2.16.4.Final
# resolves it (`mvn package` of a scratch project depending on the app, in a mutable-jar build whose
# lib/deployment/appmodel.dat was dumped), in its order: "<flags> <group:name:version> <sha1>". The flags
# are Quarkus's DependencyFlags: 4 runtime classpath, 8 build (deployment) classpath, 16 runtime
# extension, 128 top-level extension, 256 parent-first, 512 runner parent-first, 2 direct dependency.
# Every file is the Maven Central original, SHA-1 as Maven Central publishes it; the two substitutions
# (module docstring) are the everit-json-schema and config-index-deployment lines.
_MODEL_PINS = """
12 io.apicurio:apicurio-registry-common:2.4.2.Final f9f9a0b4d50c1f4d4f7f61066bfd867b2df302f9
12 org.jboss.spec.javax.ws.rs:jboss-jaxrs-api_2.1_spec:2.0.1.Final 75cdeb26ccf87bc6f9d0f31b5ec4d80aa15b662c
12 com.fasterxml.jackson.core:jackson-annotations:2.14.2 a7aae9525864930723e3453ab799521fdfd9d873
12 io.apicurio:apicurio-registry-utils-kafka:2.4.2.Final 37744d129fdeba5cc1b88d5a2374ae3d6a963eb3
12 org.eclipse.microprofile.config:microprofile-config-api:2.0.1 26fc0aba41ac450ddf86c8d72d58635e89b84feb
12 org.apache.kafka:kafka-clients:3.3.2 be7a3c50a4026822671bdfe6b53e3987149f951f
12 com.github.luben:zstd-jni:1.5.2-1 fad786abc1d1b81570e8d9a2fc8a1ef479bc27b6
12 org.lz4:lz4-java:1.8.0 4b986a99445e49ea5fbf5d149c4b63f6ed6c6780
12 org.xerial.snappy:snappy-java:1.1.8.4 66f0d56454509f6e36175f2331572e250e04a6cc
12 io.apicurio:apicurio-registry-schema-util-provider:2.4.2.Final fa9068ec9b66d52609f3723f8f4b7381963e60e8
12 io.apicurio:apicurio-registry-schema-util-common:2.4.2.Final 4eb0d9e35d7987781a13a6c89d11b108594ecd5e
12 org.jboss.slf4j:slf4j-jboss-logging:1.2.1.Final 3cda1be737abbb073627151cc58fdb0579e2f570
12 com.fasterxml.jackson.datatype:jackson-datatype-json-org:2.14.2 4be4c2e694f46d2791fe447b030a4f4d48caeeb8
12 io.apicurio:apicurio-registry-schema-util-json:2.4.2.Final 065b6358a8a6726112c153a5e763aa8ab507a3d8
12 io.apicurio:apicurio-registry-schema-util-protobuf:2.4.2.Final 5cbad9866b05a4310d1d9d3c14d9960dd66e8695
12 io.apicurio:apicurio-registry-schema-util-asyncapi:2.4.2.Final 0f11ab3640a73d667936ca325a0901e82f752658
12 io.apicurio:apicurio-registry-schema-util-avro:2.4.2.Final d8978ca70c9fbceefe47a05ec605404472a96a2b
12 org.apache.avro:avro:1.11.1 81af5d4b9bdaaf4ba41bcb0df5241355ec34c630
12 org.apache.commons:commons-compress:1.22 691a8b4e6cf4248c3bc72c8b719337d5cb7359fa
12 io.apicurio:apicurio-registry-schema-util-graphql:2.4.2.Final 4986b461d7c0073c977509b8bfbe094559be2b43
12 com.graphql-java:graphql-java:20.2 e1c82dba7f2e1c08d3b7759ba3a30aafab046b00
12 com.graphql-java:java-dataloader:3.2.0 f45c53595cab4c23e35526cc122e2bd159a50516
12 org.reactivestreams:reactive-streams:1.0.3 d9fb7a7926ffa635b3dcaa5049fb2bfa25b3e7d0
12 io.apicurio:apicurio-registry-schema-util-kconnect:2.4.2.Final dc98fb2cef4c0b5ef48ae4c3ceaf502651b41a6a
12 org.apache.kafka:connect-json:2.8.1 a9fadc904862092ecaf8c17c5aaeb999c137bd7a
12 org.apache.kafka:connect-api:2.8.1 90c5c30b025cc3381c3e876b47b3df29c96c63c2
12 io.apicurio:apicurio-registry-schema-util-openapi:2.4.2.Final 2410bfa4987f761cc5cc1bccdd06c9d4fe0ccb27
12 io.apicurio:apicurio-data-models:2.0.0.RC1 704b91d6b9e68418766c9dbcc3e7fd7518ab90eb
12 io.apicurio:apicurio-registry-schema-util-wsdl:2.4.2.Final cabb6613450a80597a762fa0c7001bbf23df2cfd
12 wsdl4j:wsdl4j:1.6.3 6d106a6845a3d3477a1560008479312888e94f2f
12 io.apicurio:apicurio-registry-schema-util-xml:2.4.2.Final 667bd634b51230c3d2078ae88ebfe9a7c124d3bd
12 org.apache.santuario:xmlsec:3.0.2 9bb2f2603902354290c9d5277f67d50444fd8777
12 jakarta.xml.bind:jakarta.xml.bind-api:2.3.3 48e3b9cfc10752fba3521d6511f4165bea951801
12 jakarta.activation:jakarta.activation-api:1.2.1 562a587face36ec7eff2db7f2fc95425c6602bc1
12 com.fasterxml.woodstox:woodstox-core:6.5.0 cafa8aac5ddf104d28f172f19294d88d5e8c24c0
12 org.codehaus.woodstox:stax2-api:4.2.1 a3f7325c52240418c2ba257b103c3c550e140c83
12 io.apicurio:apicurio-registry-schema-util-xsd:2.4.2.Final 7a30aa8ffa1bdbe8519c9f110f7351f5e59060d6
12 io.apicurio:apicurio-common-app-components-core:0.1.18.Final 633f2b7608db8eb38177d388005f0152a73fc1ee
12 io.apicurio:apicurio-common-app-components-logging:0.1.18.Final 82944ee4f23b41cfd51b6416e7227ece219c0fd3
12 commons-beanutils:commons-beanutils:1.9.4 d52b9abcd97f38c81342bb7e7ae1eee9b73cba51
12 io.apicurio:apicurio-common-app-components-config:0.1.18.Final d3f0d0c09dcd34824eeeed0ef81c6c4fabf7e203
12 io.apicurio:apicurio-common-app-components-config-definitions:0.1.18.Final d811e46d3f0aa65ea5e45057b6a28d9a90c329a7
12 io.apicurio:apicurio-common-app-components-config-impl:0.1.18.Final e2971609e0cb70a659224e54ef7f0a75179c4da2
12 io.apicurio:apicurio-common-app-components-storage-spi:0.1.18.Final 3c69e8eb70d7af08a85e3f6b2fd6468bf8aafbb2
12 io.apicurio:apicurio-common-app-components-content:0.1.18.Final 4049796fd60e624186eadbfd217860553c153827
156 io.apicurio:apicurio-common-app-components-config-index:0.1.18.Final aa42183979142a5f63c4e97a15eec954cd868afa
28 io.quarkus:quarkus-arc:2.16.4.Final 539ba2d422f550bb68c3d27aea1f01291c332bba
12 io.quarkus.arc:arc:2.16.4.Final f30eabbb504c87487a8c281c70c79ef5a2f2b327
28 io.quarkus:quarkus-core:2.16.4.Final 823d24afcd1c4b209c6a18c049560e345da38a09
12 jakarta.inject:jakarta.inject-api:1.0 93164437046e06b4876e069b8e7a321a02f10a2d
780 io.quarkus:quarkus-development-mode-spi:2.16.4.Final 9e51ba4c22da85f65fa486246b38d2289ed6c2e5
12 io.smallrye.config:smallrye-config:2.13.3 500909aedb348086516a8cdb389b5ffe8c4fe31e
12 io.smallrye.config:smallrye-config-core:2.13.3 9569130ae50397ee6cb7ead7de67472b30875197
12 io.smallrye.common:smallrye-common-expression:1.13.2 3b4b12bdad13241d8c1a439aaeecdc271601ed34
12 io.smallrye.common:smallrye-common-function:1.13.2 781d80272140a6382c2d54f02b3fc61337179558
12 io.smallrye.common:smallrye-common-classloader:1.13.2 7b2d6bb2f608dd77974926cbd09d920233eeb611
12 io.smallrye.config:smallrye-config-common:2.13.3 b5660f07aa2eb9c5432946efe924e19f061606af
780 org.jboss.logging:jboss-logging:3.5.0.Final c19307cc11f28f5e2679347e633a3294d865334d
780 org.jboss.logmanager:jboss-logmanager-embedded:1.0.11 932c894378d603b78abb364d17ddd113f7122a90
12 org.jboss.logging:jboss-logging-annotations:2.2.1.Final ee3db82d956ee22c4f1f2df9c611e048e79a4a43
12 org.jboss.threads:jboss-threads:3.4.3.Final 2433a04e5a0f8982454a2bbe2700ee272a3a71c2
780 org.graalvm.sdk:graal-sdk:22.3.0 83179e3310a2ece87266923fede5ef7355c68c9a
780 org.wildfly.common:wildfly-common:1.5.4.Final-format-001 d600b29d51306b30b29e7de64f6fedf61beb1808
780 io.quarkus:quarkus-bootstrap-runner:2.16.4.Final dd5f199ea73a69dddc13f5eada58348435d92217
780 io.smallrye.common:smallrye-common-io:1.13.2 e462aeaf4c02e34c251ebf1788d04067f6ddae09
12 io.quarkus:quarkus-fs-util:0.0.9 af43a8b4da2a2c9119e5280929887445847597a0
12 io.apicurio:apicurio-common-app-components-auth:0.1.18.Final bfdd4388e3a164b3886a21bb69476556b8ccc2af
12 io.apicurio:apicurio-common-app-components-util:0.1.18.Final 00d7bcdcdfc00f35d02d20b84a4af2a5826dc4e7
12 io.apicurio:apicurio-tenant-manager-client:0.1.3.Final 5e39addf3b963d5db251adf58b04776c62e8c7d6
12 io.apicurio:apicurio-tenant-manager-datamodel:0.1.3.Final 94e087efbff581a999131b174823e0a44a95366c
12 jakarta.validation:jakarta.validation-api:2.0.2 5eacc6522521f7eacb081f95cee1e231648461e7
12 com.fasterxml.jackson.core:jackson-databind:2.14.2 01e71fddbc80bb86f71a6345ac1e8ab8a00e7134
12 io.apicurio:apicurio-common-rest-client-jdk:0.1.14 fcbfb760188552c9a3ad0ec6ff0f61c19bdffe49
12 io.apicurio:apicurio-common-rest-client-vertx:0.1.13.Final e58f6792455e363035e417bd0b1939248733e289
12 io.apicurio:apicurio-common-rest-client-common:0.1.13.Final 5d62e5c443e79b0b4b6a7b032b615429e45fe7e2
12 io.vertx:vertx-web-client:4.3.7 8fad7ea0236d6d4daa9c290b72d482dedcf9ce1d
12 io.vertx:vertx-uri-template:4.3.7 8fa765d673ef0581384c75263d204b17aa37d2be
12 io.vertx:vertx-web-common:4.3.7 76b12e2b58b790a2b99de7afc3fb81e9b948f60e
12 io.vertx:vertx-auth-common:4.3.7 fbd16a0fad72279cf87bbec529ef60c533902c26
12 io.vertx:vertx-core:4.3.7 7d80441d7b57b7a66a9a2b67072186776e295eb3
12 io.netty:netty-common:4.1.86.Final 1dceab4662a9cc93faf87b237bb41103b1bc7f0e
12 io.netty:netty-handler-proxy:4.1.86.Final 2515d76be9671cc248bab77352edddd16bfa9436
12 io.netty:netty-codec-socks:4.1.86.Final 854264e7ad75887bc25b82eb38e4ee65c8b44dc3
12 io.netty:netty-resolver:4.1.86.Final bad83d479f7bd8ea84eefd77c316435be4c97270
12 io.netty:netty-resolver-dns:4.1.86.Final a1e2ef79e4944b5d38092328c36c68e677a4b5f3
12 io.netty:netty-codec-dns:4.1.86.Final c8de479f36a8457541fcbb0016c851bde3e67693
12 io.apicurio:apicurio-registry-utils-import-export:2.4.2.Final ce9e2308982e856edb7d26dfcffbcd922d1a92d2
12 io.apicurio:apicurio-registry-protobuf-schema-utilities:2.4.2.Final 5f379fbbf265814bb6007fdc9f036ffa0fa5a638
12 com.google.protobuf:protobuf-java:3.22.0 aa58e31e88e9974452f0498e237532df5732257a
12 com.google.api.grpc:proto-google-common-protos:2.11.0 7c35d59614deed60e7c8330e1d0666dafd5fc7b2
12 com.squareup.wire:wire-schema:4.5.4 31732cbb550e1593189134bbb51cfb3d10bc8e5f
12 com.squareup.wire:wire-runtime:4.5.4 425d139fc1aea058188b3eeab518b7be179f859c
12 org.jetbrains.kotlin:kotlin-stdlib-common:1.7.22 5dd2c9dcf64c94b46cf4bdb6fa4035b9bb726e2e
12 com.squareup.wire:wire-compiler:4.3.0 ba9e78ba6a8e75c147242e61c9745d86928608e7
12 com.squareup.wire:wire-schema-jvm:4.3.0 11b23402487bdc94913ecd402899c4aabe67b54a
12 com.squareup.wire:wire-runtime-jvm:4.3.0 9f7a293df77db2e7186d721293e72caec0a2789c
12 org.jetbrains.kotlin:kotlin-stdlib-jdk8:1.7.22 b75c999616784d452613d670fec56a527f2bd3d1
12 org.jetbrains.kotlin:kotlin-stdlib:1.7.22 9fb43bccb6cf8cfaaf3776c75f5df4f052f09b72
12 org.jetbrains:annotations:24.0.0 69b8b443c437fdeefa8d20c18d257b94836a92b9
12 org.jetbrains.kotlin:kotlin-stdlib-jdk7:1.7.22 6aa0a0e051d6b828dc25047025ec245758fab6d9
12 com.squareup.wire:wire-kotlin-generator:4.3.0 099ba305e5ded8c071ac2a66984ee63a5c201480
12 com.squareup:kotlinpoet:1.10.2 7780696c2b671891e22009f6bc2167701bb39739
12 org.jetbrains.kotlin:kotlin-reflect:1.7.22 e61a16c5c838d324529a6aa72dfb88ea98958a29
12 com.squareup.wire:wire-grpc-client-jvm:4.3.0 5e2b1415d3ce9ef6732acb2ceb2867e0a6247031
12 com.squareup.okhttp3:okhttp:3.14.9 3e6d101343c7ea687cd593e4990f73b25c878383
12 org.jetbrains.kotlinx:kotlinx-coroutines-core-jvm:1.6.4 2c997cd1c0ef33f3e751d3831929aeff1390cb30
12 com.squareup.wire:wire-grpc-server-generator:4.3.0 2e7f3b0c26059f26e461a3fe4e9484272475ce7d
12 com.squareup.wire:wire-java-generator:4.3.0 4e7002996ac1fa8ac81f818dd6bcb312686f327f
12 com.squareup:javapoet:1.13.0 d6562d385049f35eb50403fa86bb11cce76b866a
12 com.squareup.wire:wire-swift-generator:4.3.0 a1769bfbeeddff09bacbea852b9416677c490d3f
12 io.outfoxx:swiftpoet:1.3.1 44659975d240484f438fd36169784d10776f1b85
12 com.squareup.wire:wire-profiles:4.3.0 2aa5c1f61f2fbb37ee06d3dca38ab1d54749ca44
12 com.squareup.okio:okio:1.17.2 78c7820b205002da4d2d137f6f312bd64b3d6049
12 org.jetbrains.kotlinx:kotlinx-serialization-core-jvm:1.0.1 0d0c5ab89372940ed3fb77952e79b9cd5d466d86
12 com.charleskorn.kaml:kaml:0.20.0 ba87fe23d666195fd7586a9806a945bccc681ec4
12 org.snakeyaml:snakeyaml-engine:2.1 16377c3c7d093f4e6b733c69898a888c9fc88034
780 com.ibm.icu:icu4j:72.1 bc9057df4b5efddf7f6d1880bf7f3399f4ce5633
12 com.squareup.okio:okio-jvm:3.3.0 2d175add2d06a67bda111ae5455e49b42d0bb287
12 com.squareup.okio:okio-fakefilesystem:3.3.0 64d8c972725e3638965709ecd1c8dad7f3390ba8
12 com.squareup.okio:okio-fakefilesystem-jvm:3.3.0 90110a93bc213d11d2aa9b4298dca893baf0a1be
12 org.jetbrains.kotlinx:kotlinx-datetime-jvm:0.4.0 2224732fcb9b6116fbeb0926dd108604e578356b
156 io.quarkus:quarkus-undertow:2.16.4.Final 53d69c3fe688595d4a9c9b5f32330bcb70b3fe93
28 io.quarkus:quarkus-vertx-http:2.16.4.Final d8962c880caa0e562c17c6b803f3bbb48e2933fb
12 io.quarkus:quarkus-security-runtime-spi:2.16.4.Final 582867f277a9059d9c4a6a89027cb03437cd9c98
12 io.quarkus:quarkus-vertx-http-dev-console-runtime-spi:2.16.4.Final 4425f9cf23bd696e1ccc69aaf9ce36c913f179d0
12 io.smallrye.reactive:smallrye-mutiny-vertx-web:2.30.1 d363da33b8a34b1e1820678ee8d910278357beb8
12 io.smallrye.reactive:smallrye-mutiny-vertx-web-common:2.30.1 9e6bb77aeaadb499608355eed783ead605bf6eb0
12 io.smallrye.reactive:smallrye-mutiny-vertx-auth-common:2.30.1 838c10aa40f72164dfedf3a1de2c302f5b7ae856
12 io.smallrye.reactive:smallrye-mutiny-vertx-bridge-common:2.30.1 ab475b8134adb57996fee0c258174d01ae29336e
12 io.smallrye.reactive:smallrye-mutiny-vertx-uri-template:2.30.1 1918005e855c0e301eaf0792fbd0b4ce80cb812b
12 io.vertx:vertx-web:4.3.7 53052f693c7d19b5ab2c08597996dd35d7e3050d
12 io.vertx:vertx-bridge-common:4.3.7 be56d8de0fcb1ef30f0035b96bdc853f5da92468
524 io.github.crac:org-crac:0.1.3 78ca3679ec8ff707c18b17885ef589467780c486
12 io.quarkus.security:quarkus-security:1.1.4.Final 80471f8fa23a4a1c9237426807013c2ea853cb1a
12 io.smallrye.reactive:mutiny:1.9.0 1898430937b8babab0c98d685b26c7672422546b
12 jakarta.enterprise:jakarta.enterprise.cdi-api:2.0.2 58f497f362cd19c2f8842d75c491d270f0600e7f
12 jakarta.el:jakarta.el-api:3.0.3 f311ab94bb1d4380690a53d737226a6b879dd4f1
12 io.quarkus.http:quarkus-http-servlet:4.2.1 1a6e65b0618a6e6e2ee759c0aab41646698fd69e
268 jakarta.servlet:jakarta.servlet-api:4.0.3 7c810f7bca93d109bac3323286b8e5ec6c394e12
12 jakarta.annotation:jakarta.annotation-api:1.3.5 59eb84ee0d616332ff44aba065f3888cf002cd2d
12 io.quarkus.http:quarkus-http-vertx-backend:4.2.1 e86699ae635e31c6cb95d84c8d183829bb6f7f62
12 io.quarkus.http:quarkus-http-http-core:4.2.1 1e4b40a147bdd41c5bf7494a7967ae778f2e80a8
12 io.quarkus.http:quarkus-http-core:4.2.1 3c8a905a422fb7c58a7f0fceb04a668ae66a05d9
12 io.netty:netty-codec-http:4.1.86.Final 23674593f004959ae002ec348626eecf677191ae
12 org.eclipse.microprofile.context-propagation:microprofile-context-propagation-api:1.2 e8efc0f2ab4ec6b31bd8474a4a4d834965e4e8e9
156 io.quarkus:quarkus-jackson:2.16.4.Final 1652959dc8e39637e49298fa476788e9d11c4921
12 com.fasterxml.jackson.datatype:jackson-datatype-jsr310:2.14.2 796518148a385b2728d44886cc0f8852eb8eeb53
12 com.fasterxml.jackson.datatype:jackson-datatype-jdk8:2.14.2 2f3c71211b6ea7a978eba33574d7135d536e07fb
12 com.fasterxml.jackson.module:jackson-module-parameter-names:2.14.2 2b6c19b3d99dda02915515df879ab9e23fed3864
156 io.quarkus:quarkus-resteasy-jackson:2.16.4.Final b1fde8cf531cb1f818dc2bbf772b66c9bda2ae21
28 io.quarkus:quarkus-resteasy:2.16.4.Final b3bfad05c4c08f533c10b15c2c4c71c1b742c63c
28 io.quarkus:quarkus-resteasy-server-common:2.16.4.Final 05aad2f1754776fb211cd51271e6756f554e57c9
12 org.jboss.resteasy:resteasy-jackson2-provider:4.7.7.Final 8138a8f138eb0f56193125f20be27d4b73ab673d
12 com.fasterxml.jackson.jaxrs:jackson-jaxrs-json-provider:2.14.2 949391a8e576cb38783f5d31675a2ea70c8753fa
12 com.fasterxml.jackson.jaxrs:jackson-jaxrs-base:2.14.2 03006ab2f6786b419893cae56b9f6ec58d1e8aec
12 com.fasterxml.jackson.module:jackson-module-jaxb-annotations:2.14.2 f7a5457c02d83103710973a4ffdce430ccdc1fd2
12 com.github.java-json-tools:json-patch:1.13 c8b72249e50fe778e7df223e5b1fed1931a4a688
12 com.github.java-json-tools:msg-simple:1.2 a06afa2d5d75c98e54ab370107930978fc3f9937
12 com.github.java-json-tools:btf:1.3 6cf5405e214cbc83337a107cdef8401fb6aa6383
12 com.github.java-json-tools:jackson-coreutils:2.0 6374371261b91b829d10f21256b2feefdf8f0a78
12 org.jboss.spec.javax.xml.bind:jboss-jaxb-api_2.3_spec:2.0.0.Final 1d2b5404a556a4aeddde8a9676cec8ee01b4e0a0
156 io.quarkus:quarkus-smallrye-health:2.16.4.Final 83ad637aae2c2902672417e4208b469b183848c8
12 io.smallrye:smallrye-health:3.3.1 c7717357ef8dfd8d845fc5343a899ed52b69c885
12 org.eclipse.microprofile.health:microprofile-health-api:3.1 3add01d04b7d84d54dbcf1e88c58ef6eaacc611b
12 io.smallrye:smallrye-health-api:3.3.1 080cb67f368d72d87cfa8f7bf1afbbe52a63ffdc
12 io.smallrye:smallrye-health-provided-checks:3.3.1 f250c48b47d98346435fcec3a80819b84084d305
28 io.quarkus:quarkus-jsonp:2.16.4.Final 9e4765927328636f15d798902fab5d9ac9bfa8ef
268 org.glassfish:jakarta.json:1.1.6 a39aba0ef0a70c3f54a44a2c539a4f11c9bb07e8
156 io.quarkus:quarkus-micrometer-registry-prometheus:2.16.4.Final 023dafc2f3798949650c1799d4b47933d03c4574
28 io.quarkus:quarkus-micrometer:2.16.4.Final 6ef86b754a38e6387a4d530b8df4bf7d86a63ffc
12 io.micrometer:micrometer-core:1.10.2 0ca69ca5d4d1fea81ec5f3e05bc159db4e3c87e1
12 io.micrometer:micrometer-commons:1.10.2 3a97e1874b8ca9c1c08f67d58bf7d567bb748601
12 io.micrometer:micrometer-observation:1.10.2 5b63205c0e9f3acf4b84f852ea707f9f9fffda6f
12 org.hdrhistogram:HdrHistogram:2.1.12 6eb7552156e0d517ae80cc2247be1427c8d90452
12 org.latencyutils:LatencyUtils:2.0.3 769c0b82cb2421c8256300e907298a9410a2a3d3
12 io.micrometer:micrometer-registry-prometheus:1.10.2 d430dc8cfde5f5dfd7c9b0ddb13a87b84a39baaf
12 io.prometheus:simpleclient_common:0.16.0 a09a8c790a20309b942a9fdbfe77da22407096e6
12 io.prometheus:simpleclient:0.16.0 28b0eaf7c500c506976da8d0fc9cad6c278e8d87
12 io.prometheus:simpleclient_tracer_otel:0.16.0 cc3d2b7b7cb6f077e3b1ee1d3e99eb54fddfa151
12 io.prometheus:simpleclient_tracer_common:0.16.0 dec00ef7c6155c4ca1109ec8248f7ff58d8f6cd3
12 io.prometheus:simpleclient_tracer_otel_agent:0.16.0 009d724771e339ff7ec6cd7c0cc170d3470904c5
156 io.quarkus:quarkus-vertx:2.16.4.Final 055a59c4e6be4a4929097b9d64cbd6d56f9a2d44
28 io.quarkus:quarkus-netty:2.16.4.Final 0dd3b5e7bb22260fb1df22df0b777ca344c03a02
12 io.netty:netty-codec:4.1.86.Final ee126da926ea202da3b21eb737788ef83b1db772
12 io.netty:netty-codec-http2:4.1.86.Final ac0ca067e4118533ad1038776fcd9d5f3058b7d4
12 io.netty:netty-handler:4.1.86.Final 0bcb65230218286e6456b5d085cb42e67776eb70
12 io.netty:netty-transport-native-unix-common:4.1.86.Final 5e0e7fc1c337485cabcf7971faefe692b76f93a2
12 com.aayushatharva.brotli4j:brotli4j:1.8.0 2bc52df23c9aed6aaaf63156fa9a4f7beca80f56
12 com.aayushatharva.brotli4j:native-linux-x86_64:1.8.0 add74b11206e3a6ff14c7405718a0b61abae9a75
12 io.netty:netty-codec-haproxy:4.1.86.Final f61d71fb0aec1761a9b86dd26c6139d7261af242
12 io.netty:netty-buffer:4.1.86.Final a66fa0ed2687eb33a2e53a17a6df61bfe3b3f2bd
12 io.netty:netty-transport:4.1.86.Final 7c7739c41fd110c3576e9faace332ee957f27203
12 io.smallrye.common:smallrye-common-annotation:1.13.2 44ad4ebb37b159c4303f787c1a5320fa7e58f5f9
12 io.smallrye.common:smallrye-common-vertx-context:1.13.2 411ab18a0a1e2791f226052c5547ccd7bcdfb693
12 io.smallrye.common:smallrye-common-constraint:1.13.2 d7fc54a47185ed2f2063f0aee79f827b3ef31135
28 io.quarkus:quarkus-mutiny:2.16.4.Final 93cb14f68e3da3f89cd9d588eb8ed3589069bd63
12 io.smallrye.reactive:mutiny-smallrye-context-propagation:1.9.0 f168305267d2425eb8eae76e2aa6aad69ba91024
780 io.quarkus:quarkus-vertx-latebound-mdc-provider:2.16.4.Final b46a29c14c2592f7bceb21f5a1f552dc2065d373
12 io.smallrye.reactive:smallrye-mutiny-vertx-core:2.30.1 77b39f9673b230ca1e8a2e6a186d1dad6a235fe6
12 io.smallrye.reactive:smallrye-mutiny-vertx-runtime:2.30.1 766ef64ec7192d7292408e8be0fe49e627a978d1
12 io.smallrye.reactive:vertx-mutiny-generator:2.30.1 973f05b9fb744f25f571fb139da9aac7f7f2afc0
12 io.vertx:vertx-codegen:4.3.7 7a63e0431c046188b9371ac673b874c47d23a74f
12 io.smallrye:smallrye-fault-tolerance-vertx:5.6.0 01d08f40a3e669c03b3b9655a876e96630b319ca
156 io.quarkus:quarkus-oidc:2.16.4.Final ea68653c37b7c3b7264719b4d5b0d6fca5beda48
28 io.quarkus:quarkus-security:2.16.4.Final d7a24b7b0c3c5e07db6ffa6bd1c60cf3fa7501c1
28 io.quarkus:quarkus-oidc-common:2.16.4.Final ff4dc540de8d490a8eedfd60583adf0b2293a5e5
12 io.smallrye.reactive:smallrye-mutiny-vertx-web-client:2.30.1 0b4376c0184ae5f06c5c2ebededf470bbb1c1124
28 io.quarkus:quarkus-smallrye-jwt-build:2.16.4.Final 88d809bcf5accf58a661eabad100b3237257a50d
12 io.smallrye:smallrye-jwt-build:3.6.0 55bf802d0318603531e71dca36703a5501ba5b06
12 io.smallrye:smallrye-jwt:3.6.0 9d8640ff262526519f3396783ca998f61cf108ef
12 org.eclipse.microprofile.jwt:microprofile-jwt-auth-api:1.2 1db6a692052a1add6a4db643541037b14cd3c3aa
12 org.bitbucket.b_c:jose4j:0.9.2 28a468e48ecfed1379d426c62e1b128d28432724
12 io.smallrye:smallrye-jwt-common:3.6.0 a5dee5d2bff8130b2c951ff8d16266cf53c96880
156 io.quarkus:quarkus-scheduler:2.16.4.Final 2ca06e5c05204da51a7f38fae0436b734d3cef9b
12 io.quarkus:quarkus-scheduler-kotlin:2.16.4.Final ecd700d392986862bcccf1c9d9c19f05a52ec0c6
12 io.quarkus:quarkus-scheduler-common:2.16.4.Final f299746a1407d9525211a77425a4cec6e3b9027e
12 io.quarkus:quarkus-scheduler-api:2.16.4.Final e076db9a461cb6990287bf8d83c8d3958e7f91cc
12 com.cronutils:cron-utils:9.2.0 eda286c4486a111977a45c319a573bc298f4dece
268 org.jboss.slf4j:slf4j-jboss-logmanager:1.2.0.Final baff8ae78011e6859e127a5cb6f16332a056fd93
12 org.glassfish:jakarta.el:3.0.4 f48473482c0e3e714f87186d9305bcae30b7f5cb
156 io.quarkus:quarkus-smallrye-context-propagation:2.16.4.Final 556353dd309df3346c0eac76c8c570dedda4eb22
12 io.smallrye:smallrye-context-propagation:1.2.2 e9dbd4df686dd1dd97f13cac346d8c0d6c9c35c3
12 io.smallrye:smallrye-context-propagation-api:1.2.2 9802755de30337cc5fe07d7c2c3b914f8fa3c13f
12 io.smallrye:smallrye-context-propagation-storage:1.2.2 daccce22e3578b8fb477ed0244447716aa7b417b
156 io.quarkus:quarkus-rest-client:2.16.4.Final ac036adf78db5d981692947cd3f71a6e4767fa35
28 io.quarkus:quarkus-resteasy-common:2.16.4.Final 76817738f701166fba455ffc05c50dc325e0f4a0
12 org.jboss.resteasy:resteasy-core:4.7.7.Final f1c7e77f5c011e642695e2b8afbbdf8c9cf3c145
12 org.jboss.resteasy:resteasy-core-spi:4.7.7.Final 3773ff45723fe7365bf23e846f0d7a746c7f251d
12 com.ibm.async:asyncutil:0.1.0 440941c382166029a299602e6c9ff5abde1b5143
12 com.sun.activation:jakarta.activation:1.2.1 8013606426a73d8ba6b568370877251e91a38b89
28 io.quarkus:quarkus-apache-httpclient:2.16.4.Final 2d66a45bdba3a1e3cae23d2a85d56874d19cf5b5
12 org.apache.httpcomponents:httpclient:4.5.14 1194890e6f56ec29177673f2f12d0b8e627dec98
28 io.quarkus:quarkus-rest-client-config:2.16.4.Final 95eea37e6e07994484ba9fa481f63b18a7703955
12 org.eclipse.microprofile.rest.client:microprofile-rest-client-api:2.0 199e0041cc6ceee42aaf140f9a075a3133ac2293
12 io.smallrye:jandex:3.0.5 c548a4871b552292dbdd65409d3fda145c8925c1
12 org.jboss.resteasy:resteasy-client-microprofile:4.7.7.Final 24c39345f5357883e79dd853adc723cbd0b70deb
12 org.jboss.resteasy:resteasy-client-microprofile-base:4.7.7.Final a2708c007c76fd296b604d20d7458526daad8920
12 org.jboss.resteasy:resteasy-client:4.7.7.Final f9fb5f3bbda072bb404d7482be2c32721a8600fa
12 org.jboss.resteasy:resteasy-client-api:4.7.7.Final 7f020ddd8162da89d525a69a0af1638abc515430
12 commons-io:commons-io:2.11.0 a2503f302b11ebde7ebc3df41daebe0e4eea3689
12 org.jboss.resteasy:resteasy-cdi:4.7.7.Final d01a401070fef184ad08a3c0819ffcd37cc196cf
12 jakarta.interceptor:jakarta.interceptor-api:1.2.5 20cbde692c555692ca835fb6ecb4a8c95acbe6e0
12 org.apache.httpcomponents:httpasyncclient:4.1.5 cd18227f1eb8e9a263286c1d7362ceb24f6f9b32
12 org.apache.httpcomponents:httpcore:4.4.16 51cf043c87253c9f58b539c9f7e44c8894223850
12 org.apache.httpcomponents:httpcore-nio:4.4.16 cd21c80a9956be48c4c1cfd2f594ba02857d0927
12 org.jboss.logging:commons-logging-jboss-logging:1.0.0.Final 27a4e823d661bde67ec103bba2baf33cddde6e75
156 io.quarkus:quarkus-rest-client-jackson:2.16.4.Final 78a16ba2e14c6addd4440c9a99e6583e07a2b244
156 io.quarkus:quarkus-smallrye-fault-tolerance:2.16.4.Final 3a4183d487fe69e7a09ee760185b9ad9745fe7f6
12 io.smallrye:smallrye-fault-tolerance:5.6.0 85bdd3546adfbc22282960154b266625bf3fe65d
12 org.eclipse.microprofile.fault-tolerance:microprofile-fault-tolerance-api:3.0 98fe51b591a6102d53ad6c2bb79323ce151e6d47
12 io.smallrye:smallrye-fault-tolerance-api:5.6.0 d1c364fb105cda93200c7fa2c66bc80c22b36ae9
12 io.smallrye:smallrye-fault-tolerance-core:5.6.0 d0627b9d2e9daf0ab3cf7a1d71c04106ce761b8c
12 io.smallrye:smallrye-fault-tolerance-autoconfig-core:5.6.0 b92cdba168c15c62599c85f5981a0a64a17cc536
12 io.smallrye:smallrye-fault-tolerance-context-propagation:5.6.0 e58fab8e941c91604abb8eac3b6dfde39adf0ccd
12 io.smallrye:smallrye-fault-tolerance-mutiny:5.6.0 db12f47a8f563956541db3cda31d93050aadabe7
156 io.quarkus:quarkus-jdbc-h2:2.16.4.Final 836e36fad47355f8903fb135d5bd3d259914d991
268 com.h2database:h2:2.1.214 d5c2005c9e3279201e12d4776c948578b16bf8b2
12 org.locationtech.jts:jts-core:1.17.0 7e1973b5babdd98734b1ab903fc1155714402eec
156 io.quarkus:quarkus-agroal:2.16.4.Final 955f5c5d11ccd6f496034e1e780c42868ba5f9a4
28 io.quarkus:quarkus-datasource:2.16.4.Final 108d308ccd4647aba5ad68c85a261a6c58e35380
12 io.quarkus:quarkus-datasource-common:2.16.4.Final 948bbc9e78631872bc8178add2b6ae6b9c1e2a56
28 io.quarkus:quarkus-narayana-jta:2.16.4.Final 36d42eaad5f97d9358214185c3fb01b8bcc3d122
12 io.quarkus:quarkus-transaction-annotations:2.16.4.Final 01fa4e7e2cd7300d14561c5561d0ad016e22c700
12 io.smallrye:smallrye-context-propagation-jta:1.2.2 4a1bf909b1ecc20439f223b8f09fc7064abce33d
12 jakarta.transaction:jakarta.transaction-api:1.3.3 c4179d48720a1e87202115fbed6089bdc4195405
12 io.smallrye.reactive:smallrye-reactive-converter-api:2.7.0 be308bee271d9aa7dbe87c5a1383d5faf0ccc132
12 io.smallrye.reactive:smallrye-reactive-converter-mutiny:2.7.0 5286df5e0147c22cc71c8d7aec00dec20ecc79af
12 org.jboss.narayana.jta:narayana-jta:5.13.1.Final 88f52bfdf1e089b34aedd5e32ccd1a8bd546e142
12 org.jboss.spec.javax.resource:jboss-connector-api_1.7_spec:1.0.0.Final 2113100f3aac47f62a948e4a00a2ddfa6497fb62
12 org.jboss.narayana.jts:narayana-jts-integration:5.13.1.Final cc30d9ac4d77d8b49622f3cd6c0ebc9e40c000ff
12 io.agroal:agroal-api:1.16 cce6404b13e0a5f4b5bfbab1a04cdf3f87166bd6
12 io.agroal:agroal-narayana:1.16 1d933141b0fb5299e348b2a9170327ce6e268838
12 org.jboss:jboss-transaction-spi:7.6.0.Final ffb66e9647c8bafcdb9452c3a233fd229b8ec3f1
12 io.agroal:agroal-pool:1.16 e1c63fe8dc9e2cbe16cc09b59afcddf2f3669b85
12 io.quarkus:quarkus-credentials:2.16.4.Final 8cfcdccdbcd77fc7f2a22dd8e3a1ba9228b0a596
12 io.sentry:sentry:1.7.30 e0bc8a2462727d45d6cf506f522218edb6d09452
268 org.slf4j:slf4j-api:1.7.36 6c62681a2f655b49963a5983b8b0950a6120ae14
12 com.fasterxml.jackson.core:jackson-core:2.14.2 f804090e6399ce0cf78242db086017512dd71fcc
12 commons-codec:commons-codec:1.15 49d94806b6e3dc933dacbd8acb0fdbab8ebd1e5d
12 org.apache.commons:commons-lang3:3.12.0 c6842c86792ff03b9f1d1fe2aab8dc23aa6c6f0e
12 org.projectlombok:lombok:1.18.26 8f8cf0372abf564913e9796623aac4c8ea44025a
12 com.fasterxml.jackson.dataformat:jackson-dataformat-yaml:2.14.2 cc9a25c1f4212562dcb2fa33dd8ae179ba0e6a4e
12 org.yaml:snakeyaml:1.33 2cd0a87ff7df953f810c344bdf2fe3340b954c69
12 com.google.guava:guava:31.1-jre 60458f877d055d0c9114d9e1a2efb737b4bc282c
12 com.google.guava:failureaccess:1.0.1 1dcf1de382a0bf95a3d8b0849546c88bac1292c9
12 org.checkerframework:checker-qual:3.29.0 a805a761b7a734d69f9c1766ead1ff78698a1497
12 com.google.errorprone:error_prone_annotations:2.17.0 e91cdd346a8f3d4015acaa38b1843e0fc56d8070
12 com.google.j2objc:j2objc-annotations:1.3 ba035118bc8bac37d7eff77700720999acd9986d
12 io.apicurio:apicurio-registry-ui:2.4.2.Final bcc3c361092c0ef71937403da3125304190390e4
14 com.github.erosb:everit-json-schema:1.14.2 7fb69dc1577932080cf8f186da73112cdedb2478
12 org.json:json:20230227 7a0d4aca76513d8ce81f9b044ce8126b84809ad8
12 commons-validator:commons-validator:1.7 76069c915de3787f3ddd8726a56f47a95bfcbb0e
12 commons-digester:commons-digester:2.1 73a8001e7a54a255eef0f03521ec1805dc738ca0
12 commons-logging:commons-logging:1.2 4bfc12adfe4842bf07b657f0369c4cb522955686
12 commons-collections:commons-collections:3.2.2 8ad72fe39fa8c91eaaf12aadb21e0c3661fe26d5
12 com.damnhandy:handy-uri-templates:2.1.8 170102d8e1d6fcc5e8f9bef45de923285dd3a80f
12 joda-time:joda-time:2.10.2 a079fc39ccc3de02acdeb7117443e5d9bd431687
12 com.google.re2j:re2j:1.6 a13e879fd7971738d06020fefeb108cc14e14169
8 io.quarkus:quarkus-vertx-http-dev-console-spi:2.16.4.Final dc2c1da8d424e662c31c102748caf72d18d9f073
8 io.quarkus.arc:arc-processor:2.16.4.Final 9a8bb9c3614b22f1525bea3178cd7ca6c8f54b43
8 io.quarkus:quarkus-arc-deployment:2.16.4.Final 3d5ab48c421594ccb72ec109ed011b2c66ce8d66
8 io.apicurio:apicurio-common-app-components-config-index-deployment:0.1.10.Final 1b7c938340e0449d9a776838f71c9507be2152d6
8 org.fusesource.jansi:jansi:1.18 d9205bbcd4b5f9cd1effe752d18f73bd942d783f
8 org.aesh:readline:2.2 0cf54ff74c7d9a56ea382ad326723aed566759a7
8 org.aesh:aesh:2.7 bbcc467602d2235dcea6a1d5b7e7c4195a3c174c
8 org.ow2.asm:asm-analysis:9.4 0a5fec9dfc039448d4fd098fbaffcaf55373b223
8 org.ow2.asm:asm-util:9.4 ab1e0a84b72561dbaf1ee260321e72148ebf4b19
8 io.quarkus.gizmo:gizmo:1.6.0.Final dfffc56dde06ae93c51dcd3b492f07c32489ab95
8 org.ow2.asm:asm:9.4 b4e0e2d2e023aa317b7cfcfc916377ea348e07d1
8 org.ow2.asm:asm-tree:9.4 a99175a17d7fdc18cbcbd0e8ea6a5d276844190a
8 org.ow2.asm:asm-commons:9.4 8fc2810ddbcbbec0a8bbccb3f8eda58321839912
264 io.quarkus:quarkus-class-change-agent:2.16.4.Final 976217e55940831e9536f75bc6f0aa47bdae9b3a
264 io.quarkus:quarkus-bootstrap-app-model:2.16.4.Final 3abcc2a871964fde52507d4243c74e91dde87416
264 io.quarkus:quarkus-bootstrap-core:2.16.4.Final 68de933bfc467e8dbd4030b36b5936b292da4453
8 io.quarkus:quarkus-devtools-utilities:2.16.4.Final ac47289f397808578c77a9b02034ea89f1ea336f
8 org.eclipse.sisu:org.eclipse.sisu.inject:0.3.5 d4265dd4f0f1d7a06d80df5a5f475d5ff9c17140
8 io.quarkus:quarkus-builder:2.16.4.Final 4dfa0c07384cd1ffc8849f5df06b40237ce16abc
264 org.opentest4j:opentest4j:1.2.0 28c11eb91f9b6d8e200631d46e20a7f407f2a046
264 org.junit.platform:junit-platform-commons:1.9.2 6f9f8621d8230cd38aa42e58ccbc0c00569131ce
264 org.junit.platform:junit-platform-engine:1.9.2 40aeef2be7b04f96bb91e8b054affc28b7c7c935
264 org.apiguardian:apiguardian-api:1.1.2 a231e0d844d2721b0fa1b238006d15c6ded6842a
264 org.junit.platform:junit-platform-launcher:1.9.2 38e0bfad8c57d4cd1a8f27926c25ffe9543068d6
264 org.junit.jupiter:junit-jupiter-api:5.9.2 fed843581520eac594bc36bb4b0f55e7b947dda9
264 org.junit.jupiter:junit-jupiter-params:5.9.2 bc2765afb7b85b583c710dd259a11c6b8c39e912
264 org.junit.jupiter:junit-jupiter-engine:5.9.2 572f7a553b53f83ee59cc045ce1c3772864ab76c
8 org.junit.jupiter:junit-jupiter:5.9.2 26c586fbe0ebd81b48c9f11f0d998124248697ae
8 io.quarkus:quarkus-core-deployment:2.16.4.Final 76f13e4373d0eefeaa7f5f322c09167b66592bd4
8 io.quarkus:quarkus-undertow-spi:2.16.4.Final 846f7c928cbef5bd4fc3092c52f75da055929b9a
8 io.quarkus:quarkus-vertx-http-deployment-spi:2.16.4.Final fea866863e0ee49e3d04112ef050a44b9bf5aae9
8 io.quarkus.qute:qute-core:2.16.4.Final 88ae41455d48302690e7aaa82df8a071d83e8ff8
8 io.quarkus:quarkus-vertx-http-deployment:2.16.4.Final 8376f219c52b1c53fa880da6c73e1e062a4689c8
8 io.quarkus:quarkus-kubernetes-spi:2.16.4.Final 7cff5d6cbb14e64cf50c52a374bd7682941df6da
8 org.jboss.metadata:jboss-metadata-common:15.2.0.Final 0196834ee52ac34957b3e7e107682b66228e3ecc
8 org.jboss.metadata:jboss-metadata-web:15.2.0.Final a753f45274f53eb0e2bcd6aaeb86c8a1f09cc854
8 io.quarkus:quarkus-undertow-deployment:2.16.4.Final 419309c05eb3bea65bf0be6347dabf8c89c66495
8 io.quarkus:quarkus-jackson-spi:2.16.4.Final 9e43d3b30fca9c7282f0410d707e61fb705084a9
8 io.quarkus:quarkus-jackson-deployment:2.16.4.Final 7468b3d1160a43a794b006afb4ae2894c2941d02
8 io.quarkus:quarkus-jaxrs-spi-deployment:2.16.4.Final 188f4029ed0edd6613e8bf6d07c941aaed773128
8 io.quarkus:quarkus-resteasy-server-common-spi:2.16.4.Final 184216779ae42301b45274ce4ae918b9c82c563b
8 io.quarkus:quarkus-resteasy-server-common-deployment:2.16.4.Final 8cb92e47ace37f2843e19bbdfa1c9df783d2d65c
8 io.quarkus:quarkus-security-spi:2.16.4.Final 5b8c801fd15c35c7040518d6c15235337fd54d7e
8 io.quarkus:quarkus-resteasy-deployment:2.16.4.Final 41ff02ba92e51dede27a912c3ebc1d1465a38df1
8 io.quarkus:quarkus-resteasy-jackson-deployment:2.16.4.Final ed8b8791b898f0aba6eaf99b6f3136d6f94f4b88
8 io.quarkus:quarkus-jsonp-deployment:2.16.4.Final 3186038984c17c0980e54a61d1784736250e2132
8 io.quarkus:quarkus-smallrye-health-spi:2.16.4.Final 83db4d5c7e7f695bcd8c3f67d210f937cd49fcd5
8 org.eclipse.microprofile.openapi:microprofile-openapi-api:2.0.1 b599494aa87320eff7679d251ced59cd4587010c
8 io.smallrye:smallrye-open-api-core:3.1.1 bf3e85c55f5d25a81d52dfd7a9e61b4e5d13d486
8 io.quarkus:quarkus-smallrye-openapi-spi:2.16.4.Final a804112b503230c085a34ca5422fafce7cf28436
8 io.smallrye:smallrye-health-ui:3.3.1 ebaabad1b75a7f139ec3bb080c75dcf562f8fa54
8 io.quarkus:quarkus-smallrye-health-deployment:2.16.4.Final 1ff24921384e30c5a3b8aa447c85bb7b58517fd3
8 io.quarkus:quarkus-resteasy-common-spi:2.16.4.Final 2ee2bebf1610c5f78d19e0ff664c20d306a6c818
8 io.quarkus:quarkus-resteasy-reactive-spi-deployment:2.16.4.Final 92fc7539afc60aee176f8497a671476e9d69e5f3
8 io.quarkus:quarkus-micrometer-deployment:2.16.4.Final 405a1c531d82ef7b4319b5ba1b40da7637360e56
8 io.quarkus:quarkus-micrometer-registry-prometheus-deployment:2.16.4.Final 32a63e3c76e14b2ea2499b5ac6dae048ed25177a
8 io.quarkus:quarkus-netty-deployment:2.16.4.Final 3b948d84c2f614b4e7ce607c797c4d9613ffb7ce
8 io.quarkus:quarkus-mutiny-deployment:2.16.4.Final ce69cc96fb6c6ac6cc8b3bc85a9d2259068f0734
8 io.quarkus:quarkus-vertx-deployment:2.16.4.Final 03b60454f6efdad22a7ae770056cca9a4de81ca2
8 io.quarkus:quarkus-smallrye-jwt-build-deployment:2.16.4.Final 2cd83b186886bf21484740f700281265f5f104e5
8 io.quarkus:quarkus-oidc-common-deployment:2.16.4.Final 6579f86f2a3e89d31a766e257660ef12b972ea0c
8 io.quarkus:quarkus-security-deployment:2.16.4.Final 2950db6e0df92ef35d0a8cf5ce16789bb203e4ed
8 io.quarkus:quarkus-devservices-common:2.16.4.Final 59a26fb32f5335bd4bd8d2a343fb59bc7bf7d3ba
8 io.quarkus:quarkus-devservices-deployment:2.16.4.Final 573bc980399ad56282db7f7f64cbaea31b9076ea
8 org.keycloak:keycloak-common:20.0.3 e7869ba7bfa44853808e1a6af119bdd02c1e0e41
8 org.keycloak:keycloak-core:20.0.3 806bda6b0f14bf78104c5a133cf7f5d5cd1d2b19
8 org.rnorth.duct-tape:duct-tape:1.0.8 92edc22a9ab2f3e17c9bf700aaee377d50e8b530
8 com.github.docker-java:docker-java-api:3.2.13 5817ef8f770cb7e740d590090bf352df9491f3c1
8 com.github.docker-java:docker-java-transport:3.2.13 e9d308d1822181a9d48c99739f5eca014ec89199
8 net.java.dev.jna:jna:5.8.0 3551d8d827e54858214107541d3aff9c615cb615
8 com.github.docker-java:docker-java-transport-zerodep:3.2.13 4cbc2c09d6c264767a39624066987ed4a152bc68
8 org.testcontainers:testcontainers:1.17.6 11b28972d2d8bddd5a7d3b6e21016fbe13bc8e8b
1032 io.quarkus:quarkus-junit4-mock:2.16.4.Final ffebfbeace7d467780003b5beed38914cd6aa88e
8 io.quarkus:quarkus-oidc-deployment:2.16.4.Final 45f627e607cb339237dbf5fad938bbba2cad56e9
8 io.quarkus:quarkus-scheduler-deployment:2.16.4.Final b31f45bb9007dc76199e43a72467209058bf93be
8 io.quarkus:quarkus-smallrye-context-propagation-spi:2.16.4.Final d2fda5d18e4096a5161dfc2c91316712fe545810
8 io.quarkus:quarkus-smallrye-context-propagation-deployment:2.16.4.Final d36e6f003500cbee6a8bebf2efdd6649008a7829
8 io.quarkus:quarkus-resteasy-common-deployment:2.16.4.Final 5ea99c64e191ad7b9210858d362031cedc9a064c
8 io.quarkus:quarkus-apache-httpclient-deployment:2.16.4.Final 94bbaf67341f168a94dc05e38d1dff674fdee407
8 io.quarkus:quarkus-rest-client-config-deployment:2.16.4.Final af9f3fffc35eca6b44f6f4a3a199ebd024b81acb
8 io.quarkus:quarkus-rest-client-deployment:2.16.4.Final f722abf4b55b00c0875b06e0492672060de8ecbe
8 io.quarkus:quarkus-rest-client-jackson-deployment:2.16.4.Final 8b55380c608de979e6116c6b442c3e60f4c44bc9
8 io.quarkus:quarkus-smallrye-fault-tolerance-deployment:2.16.4.Final 4062e75d720ee06564c2fd78aea04adce3c6092f
8 io.quarkus:quarkus-datasource-deployment-spi:2.16.4.Final 27f1e952f88049603306dc071471da9bdb8b4948
8 io.quarkus:quarkus-devservices-h2:2.16.4.Final ecb757eb27a5874c796844c40916335f61c95aaa
8 io.quarkus:quarkus-agroal-spi:2.16.4.Final 2a4c93c11eb41b698c7adafc412af6f3a453ae9f
8 io.quarkus:quarkus-jdbc-h2-deployment:2.16.4.Final a08f0d06488e39228be138563d97cb1947883aa5
8 io.quarkus:quarkus-kubernetes-service-binding-spi:2.16.4.Final 82210854090806f878c7c5cb2eea5335b85ebd91
8 io.quarkus:quarkus-datasource-deployment:2.16.4.Final 0a1c8be6c0b4e7fbd69b7288db8c953f2f0d2b84
8 io.quarkus:quarkus-narayana-jta-deployment:2.16.4.Final d56029f77ab84bf199702d29d716bffb471e7db2
8 io.quarkus:quarkus-credentials-deployment:2.16.4.Final f0d22945f328444bfa876afd26a5ed8a09881860
8 io.quarkus:quarkus-agroal-deployment:2.16.4.Final 7e98a2c7862d473acade58c5a023e2821d713b66
"""  # noqa: E501


def _pinned(line: str) -> tuple[int, Artifact]:
    flags, coordinates, sha1 = line.split()
    group, name, version = coordinates.split(":")
    return int(flags), Artifact(group, name, version, sha1)


APICURIO_MODEL: tuple[tuple[int, Artifact], ...] = tuple(
    _pinned(line) for line in _MODEL_PINS.splitlines() if line.strip()
)

# Quarkus's production build ("augmentation") from an application model floe pins instead of Maven
# resolving it; the same steps as Quarkus's own re-augmentation of mutable jars (ReaugmentTask).
# Manifest lines (tab-separated): `app <coords> <jar>`, `dep <flags> <coords> <jar>`,
# `platform <key> <value>`, `property <key> <value>`; coords are group:name:classifier:type:version.
_AUGMENT_SOURCE = r"""
import io.quarkus.bootstrap.app.CuratedApplication;
import io.quarkus.bootstrap.app.QuarkusBootstrap;
import io.quarkus.bootstrap.model.ApplicationModel;
import io.quarkus.bootstrap.model.ApplicationModelBuilder;
import io.quarkus.bootstrap.model.CapabilityContract;
import io.quarkus.bootstrap.model.PlatformImportsImpl;
import io.quarkus.maven.dependency.DependencyFlags;
import io.quarkus.maven.dependency.ResolvedDependencyBuilder;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.zip.ZipEntry;
import java.util.zip.ZipFile;

/** Quarkus's production build of an application from a pinned, already downloaded dependency list. */
public class QuarkusAugment {
    public static void main(String[] args) throws Exception {
        Path manifest = Path.of(args[0]);
        Path target = Path.of(args[1]);
        String baseName = args[2];
        ApplicationModelBuilder model = new ApplicationModelBuilder();
        Properties buildProperties = new Properties();
        Map<String, String> platformProperties = new HashMap<>();
        Path appRoot = null;
        for (String line : Files.readAllLines(manifest)) {
            String[] field = line.split("\t");
            switch (field[0]) {
                case "app":
                    appRoot = Path.of(field[2]);
                    model.setAppArtifact(dependency(field[1], appRoot).build());
                    break;
                case "dep":
                    int flags = Integer.parseInt(field[1]);
                    Path jar = Path.of(field[3]);
                    model.addDependency(dependency(field[2], jar).setFlags(flags));
                    if ((flags & DependencyFlags.RUNTIME_EXTENSION_ARTIFACT) != 0) {
                        extension(model, field[2], jar);
                    }
                    break;
                case "platform":
                    platformProperties.put(field[1], field[2]);
                    break;
                case "property":
                    buildProperties.setProperty(field[1], field[2]);
                    break;
                default:
                    throw new IllegalArgumentException("bad manifest line: " + line);
            }
        }
        PlatformImportsImpl platform = new PlatformImportsImpl();
        platform.setPlatformProperties(platformProperties);
        model.setPlatformImports(platform);
        ApplicationModel appModel = model.build();
        try (CuratedApplication app = QuarkusBootstrap.builder()
                .setAppArtifact(appModel.getAppArtifact())
                .setExistingModel(appModel)
                .setApplicationRoot(appRoot)
                .setBuildSystemProperties(buildProperties)
                .setBaseName(baseName)
                .setTargetDirectory(target)
                .setBaseClassLoader(QuarkusAugment.class.getClassLoader())
                .build().bootstrap()) {
            app.createAugmentor().createProductionApplication();
        }
    }

    private static ResolvedDependencyBuilder dependency(String coords, Path path) {
        String[] part = coords.split(":", -1);
        return ResolvedDependencyBuilder.newInstance().setGroupId(part[0]).setArtifactId(part[1])
                .setClassifier(part[2]).setType(part[3]).setVersion(part[4]).setResolvedPath(path);
    }

    /** What Quarkus's Maven resolver reads from a runtime extension: capabilities, class-loading rules. */
    private static void extension(ApplicationModelBuilder model, String coords, Path jar) throws Exception {
        try (ZipFile zip = new ZipFile(jar.toFile())) {
            ZipEntry entry = zip.getEntry("META-INF/quarkus-extension.properties");
            if (entry == null) {
                return;
            }
            Properties properties = new Properties();
            try (InputStream in = zip.getInputStream(entry)) {
                properties.load(in);
            }
            String[] part = coords.split(":", -1);
            String extension = part[0] + ":" + part[1] + ":" + part[4];
            String provides = properties.getProperty("provides-capabilities");
            String requires = properties.getProperty("requires-capabilities");
            if (provides != null || requires != null) {
                model.addExtensionCapabilities(CapabilityContract.of(extension, provides, requires));
            }
            model.handleExtensionProperties(properties, extension);
        }
    }
}
"""

# The application's name in its logs and the runner jar's base name.
_BASE_NAME = f"apicurio-registry-{APICURIO_VERSION}"
_BUILD_PROPERTIES = {
    "quarkus.application.name": "apicurio-registry",
    "quarkus.application.version": APICURIO_VERSION,
    "quarkus.version": QUARKUS_VERSION,
}
# The quarkus-bom platform property the build's config refers to (`quarkus.native.builder-image`).
_PLATFORM_PROPERTIES = {"platform.quarkus.native.builder-image": "mandrel"}


def _build_key() -> str:
    """Changes whenever anything that goes into the build does, so a stale build is never reused."""
    digest = hashlib.sha256()
    for part in (APICURIO_APP.sha1, _MODEL_PINS, _AUGMENT_SOURCE, repr(_BUILD_PROPERTIES)):
        digest.update(part.encode())
    return digest.hexdigest()[:12]


def registry_build_dir() -> Path:
    """Where the built registry (runner jar + lib/) is cached: `~/.cache/floe/apicurio/<version>-<key>`."""
    return cache_dir() / "apicurio" / f"{APICURIO_VERSION}-{_build_key()}"


def runner_jar_path() -> Path:
    return registry_build_dir() / f"{_BASE_NAME}-runner.jar"


@contextlib.contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    """Across processes: two first starts at once build the registry once, not twice."""
    with lock_path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _manifest(app: Path, jars: list[Path]) -> str:
    lines = [f"app\t{APICURIO_APP.group}:{APICURIO_APP.name}::jar:{APICURIO_APP.version}\t{app}"]
    for (flags, artifact), jar in zip(APICURIO_MODEL, jars, strict=True):
        lines.append(f"dep\t{flags}\t{artifact.group}:{artifact.name}::jar:{artifact.version}\t{jar}")
    lines += [f"platform\t{key}\t{value}" for key, value in _PLATFORM_PROPERTIES.items()]
    lines += [f"property\t{key}\t{value}" for key, value in _BUILD_PROPERTIES.items()]
    return "\n".join(lines) + "\n"


def build_registry(java: str | None = None, *, timeout: float = 1800) -> Path:
    """The registry's runner jar: built once per machine from the pinned jars (downloaded first if needed)."""
    runner = runner_jar_path()
    if runner.exists():
        return runner
    build_dir = runner.parent
    build_dir.parent.mkdir(parents=True, exist_ok=True)
    with _exclusive(build_dir.with_name(build_dir.name + ".lock")):
        if runner.exists():
            return runner  # Another process built it while this one waited.
        java = java or java_executable()
        with ThreadPoolExecutor(max_workers=8) as pool:
            app = pool.submit(fetch, APICURIO_APP)
            jars = list(pool.map(fetch, [artifact for _, artifact in APICURIO_MODEL]))
            app_jar = app.result()
        work = Path(tempfile.mkdtemp(prefix=f"{build_dir.name}.", suffix=".part", dir=build_dir.parent))
        try:
            manifest = work / "model.tsv"
            manifest.write_text(_manifest(app_jar, jars))
            source = work / "QuarkusAugment.java"
            source.write_text(_AUGMENT_SOURCE)
            output = work / "registry"
            log = work / "build.log"
            classpath = os.pathsep.join(str(jar) for jar in jars)
            command = [java, "-Xmx1g", "-cp", classpath, str(source), str(manifest), str(output), _BASE_NAME]
            with log.open("wb") as out:
                result = subprocess.run(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    cwd=work,
                    timeout=timeout,
                    check=False,
                )
            if result.returncode != 0 or not (output / runner.name).is_file():
                hint = ""
                if not (Path(java).resolve().parent / "javac").exists():
                    hint = f" (building it once needs a JDK, not only a JRE: {java} has no javac next to it)"
                raise RuntimeError(
                    f"Building Apicurio Registry {APICURIO_VERSION} failed ({result.returncode}){hint}:\n"
                    f"{log.read_text(errors='replace')[-3000:]}"
                )
            if build_dir.exists():
                shutil.rmtree(build_dir)  # An incomplete leftover (its runner jar is gone).
            output.rename(build_dir)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return runner


def java_executable() -> str:
    """`$JAVA_HOME/bin/java`, else `java` on PATH; Java 17 or newer (a JDK for the one-time build)."""
    return find_java(
        "the schema registry", "a JDK, e.g. Debian's openjdk-17-jdk-headless, or set JAVA_HOME", MINIMUM_JAVA
    )


def _port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


class LocalSchemaRegistry:
    """Apicurio Registry, in memory, on 127.0.0.1: `with LocalSchemaRegistry() as registry: registry.url`.

    `url` is the Confluent-compatible base URL (what floe.yaml's `schema_registry.url` and Confluent
    serializers take). Every start begins empty. The JVM's output goes to `log_path`, in `log_dir` (a
    temporary directory, removed on exit, unless one is given).
    """

    def __init__(self, port: int | None = None, *, heap: str = "256m", log_dir: Path | None = None) -> None:
        self.port = port
        self.heap = heap
        self.owns_log_dir = log_dir is None
        self.log_dir = Path(tempfile.mkdtemp(prefix="floe-registry-")) if log_dir is None else Path(log_dir)
        self.process: subprocess.Popen[bytes] | None = None
        # Seconds from launching the JVM until the API answered, and (first run only) to download and build.
        self.startup_seconds: float | None = None
        self.build_seconds: float | None = None

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise RuntimeError("The schema registry has no port yet: start() it first")
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """The Confluent-compatible API: `http://127.0.0.1:<port>/apis/ccompat/v7`."""
        return self.base_url + CCOMPAT_PATH

    @property
    def log_path(self) -> Path:
        return self.log_dir / "registry.log"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, characters: int = 4000) -> str:
        if not self.log_path.exists():
            return "(no log output)"
        return self.log_path.read_text(errors="replace")[-characters:]

    def start(self, timeout: float = 180) -> LocalSchemaRegistry:
        """Build the registry when not cached yet, start the JVM and wait until its API answers."""
        if self.running:
            return self
        if self.process is not None:
            self.stop()  # It exited on its own: reap it before starting anew.
        java = java_executable()
        build_started = time.monotonic()
        already_built = runner_jar_path().exists()
        runner = build_registry(java)
        self.build_seconds = None if already_built else time.monotonic() - build_started
        if self.port is None:
            self.port = free_port()
        elif not _port_is_free(self.port):
            raise RuntimeError(
                f"Port {self.port} on 127.0.0.1 is already in use; choose another registry port"
            )
        self.log_dir.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        try:
            with self.log_path.open("ab") as log:
                self.process = subprocess.Popen(
                    [java, *self._jvm_options(), "-jar", str(runner)],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=self.log_dir,
                    # Its own session: a terminal's Ctrl-C reaches floe, which then stops the JVM.
                    start_new_session=True,
                )
            wait_until_answering(
                self.process,
                self.url + "/subjects",
                name=f"Apicurio Registry {APICURIO_VERSION}",
                timeout=timeout,
                log_text=self.log_tail,
                interval=0.25,
            )
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - started
        return self

    def _jvm_options(self) -> list[str]:
        return [
            "-Xms64m",
            f"-Xmx{self.heap}",
            # A dev registry serves a handful of requests: one GC thread and the quick compiler use the
            # least CPU on a shared machine, and start sooner.
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true",
            "-Dquarkus.http.host=127.0.0.1",
            f"-Dquarkus.http.port={self.port}",
            # Apicurio's in-memory H2 store; its production pool of 20 connections is more than needed.
            "-Dquarkus.datasource.jdbc.initial-size=2",
            "-Dquarkus.datasource.jdbc.min-size=2",
        ]

    def stop(self) -> None:
        """SIGTERM (Quarkus's graceful shutdown), then SIGKILL after 15 s."""
        stop_process(self.process)
        self.process = None

    def __enter__(self) -> LocalSchemaRegistry:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
        if self.owns_log_dir:
            shutil.rmtree(self.log_dir, ignore_errors=True)


# -- `floe dev schema-registry` ---------------------------------------------------------------------------


def _raise_keyboard_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@click.command("schema-registry")
@click.option(
    "--port", type=click.IntRange(1, 65535), default=8081, show_default=True, help="HTTP port on 127.0.0.1."
)
def registry_command(port: int) -> None:
    """Run a local Schema Registry (Apicurio, in memory, Confluent-compatible API) until Ctrl-C."""
    console = Console()
    registry = LocalSchemaRegistry(port=port)
    # SIGTERM (kill, service managers) stops the registry as cleanly as Ctrl-C does.
    signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    try:
        status = f"Starting Apicurio Registry {APICURIO_VERSION}"
        if not runner_jar_path().exists():
            status += " (first run: downloading and building it, a few minutes)"
        with console.status(status + "..."):
            registry.start()
        built = f", built in {registry.build_seconds:.0f} s" if registry.build_seconds is not None else ""
        console.print(
            f"[green]Apicurio Registry {APICURIO_VERSION}[/green] (in memory) started in "
            f"{registry.startup_seconds:.1f} s{built}\n"
            f"Confluent-compatible API: [bold]{registry.url}[/bold]\n"
            f"log: {registry.log_path}\nPress Ctrl-C to stop (the registry keeps nothing)."
        )
        assert registry.process is not None
        returncode = registry.process.wait()
        raise click.ClickException(
            f"The schema registry exited on its own ({returncode}):\n{registry.log_tail()}"
        )
    except KeyboardInterrupt:
        console.print("Stopping the schema registry...")
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        registry.stop()
        if registry.owns_log_dir:
            shutil.rmtree(registry.log_dir, ignore_errors=True)
    console.print("Schema registry stopped.")
