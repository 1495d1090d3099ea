// Runs the built shardscope-cli as a user would (a child process) for the tests that drive it:
// its exit code, stdout and stderr. The time limit is a safety net only (no timing is
// asserted): a hung CLI fails its test instead of blocking the suite.
#pragma once

#include <QByteArray>
#include <QProcess>
#include <QProcessEnvironment>
#include <QString>
#include <QStringList>

struct CliRun {
    int exitCode = -1;  // -1: did not start, crashed or hung
    QByteArray out, err;
};

inline CliRun runCli(const QStringList& args, const QString& workingDirectory,
                     const QProcessEnvironment& environment = QProcessEnvironment::systemEnvironment(),
                     int limitMs = 300'000)
{
    QProcess p;
    p.setProcessEnvironment(environment);
    p.setWorkingDirectory(workingDirectory);
    p.start(QStringLiteral(SHARDSCOPE_CLI_PATH), args);
    CliRun r;
    if (!p.waitForStarted(-1))
        return r;
    if (!p.waitForFinished(limitMs)) {
        p.kill();
        p.waitForFinished(-1);
        return r;
    }
    r.exitCode = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    r.out = p.readAllStandardOutput();
    r.err = p.readAllStandardError();
    return r;
}
