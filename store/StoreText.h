// How the store writes what it keeps as text: documents as compact JSON, times as
// ISO 8601 UTC with milliseconds (sortable as text).
#pragma once

#include <QDateTime>
#include <QJsonDocument>
#include <QJsonObject>
#include <QString>
#include <QVariant>

namespace shardscope {

inline QString nowText() { return QDateTime::currentDateTimeUtc().toString(Qt::ISODateWithMs); }

inline QString textFromJson(const QJsonObject& document)
{
    return QString::fromUtf8(QJsonDocument(document).toJson(QJsonDocument::Compact));
}

inline QJsonObject jsonFromText(const QVariant& column)
{
    return QJsonDocument::fromJson(column.toString().toUtf8()).object();
}

} // namespace shardscope
