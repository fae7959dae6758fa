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
