// JobRunner: runs one long job at a time off the GUI thread (QtConcurrent), with
// cooperative cancellation, progress and a completion callback delivered on the
// GUI thread. Starting a new job cancels the running one; a job id drops the
// results of a job that was superseded or cancelled. The work function receives
// only copies (never `this`), so nothing of the GUI is touched from the pool.
// Destroying the runner cancels the job and waits for it: closing the window
// during a run cancels it cleanly.
#pragma once

#include <QFuture>
#include <QMetaObject>
#include <QObject>
#include <QPointer>
#include <QString>
#include <QtConcurrent>

#include <atomic>
#include <functional>
#include <memory>

namespace shardscope {

class JobRunner : public QObject {
    Q_OBJECT
public:
    // Reports progress from the worker: fraction done in [0, 1] and a short text.
    using Progress = std::function<void(double fraction, const QString& text)>;

    explicit JobRunner(QObject* parent = nullptr) : QObject(parent) {}
    ~JobRunner() override
    {
        cancel();
        future_.waitForFinished();
    }

    bool busy() const { return future_.isRunning(); }
    quint64 currentJob() const { return job_; }

    void cancel()
    {
        if (cancel_)
            cancel_->store(true);
        if (busy())
            emit cancelled(job_);
    }

    // `work(cancel, progress)` runs on a pool thread; `done(result)` on this object's
    // thread, only if this job is still the current one and was not cancelled.
    template <class R>
    quint64 start(std::function<R(const std::atomic<bool>& cancel, const Progress& progress)> work,
                  std::function<void(const R&)> done)
    {
        cancel();
        const quint64 id = ++job_;
        auto flag = std::make_shared<std::atomic<bool>>(false);
        cancel_ = flag;
        QPointer<JobRunner> self(this);
        const Progress progress = [self, id](double fraction, const QString& text) {
            QMetaObject::invokeMethod(
                self.data(),
                [self, id, fraction, text] {
                    if (self && self->job_ == id)
                        emit self->progressed(fraction, text);
                },
                Qt::QueuedConnection);
        };
        emit started(id);
        future_ = QtConcurrent::run([self, id, flag, work = std::move(work), done = std::move(done), progress] {
            std::shared_ptr<R> result;
            QString error;
            try {
                result = std::make_shared<R>(work(*flag, progress));
            } catch (const std::exception& e) {
                error = QString::fromUtf8(e.what());
            }
            const bool wasCancelled = flag->load();
            QMetaObject::invokeMethod(
                self.data(),
                [self, id, result, error, wasCancelled, done] {
                    if (!self || self->job_ != id)
                        return;  // superseded: a newer job owns the GUI now
                    if (!error.isEmpty())
                        emit self->failed(id, error);
                    else if (!wasCancelled && result)
                        done(*result);
                    emit self->finished(id, wasCancelled);
                },
                Qt::QueuedConnection);
        });
        return id;
    }

signals:
    void started(quint64 job);
    void progressed(double fraction, const QString& text);
    void finished(quint64 job, bool cancelled);
    void cancelled(quint64 job);
    void failed(quint64 job, const QString& message);

private:
    quint64 job_ = 0;
    std::shared_ptr<std::atomic<bool>> cancel_;
    QFuture<void> future_;
};

} // namespace shardscope
