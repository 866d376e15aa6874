/** The sidebar's icons: one per kind of catalog object (JupyterLab's own where one fits). */
import { fileIcon, folderIcon, LabIcon, tableRowsIcon } from '@jupyterlab/ui-components';

import { NodeKind } from './catalogModel';

const svg = (body: string) =>
  `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">` +
  `<g class="jp-icon3" fill="#616161">${body}</g></svg>`;

/** A stack of disks: the sidebar's tab and catalogs. */
export const catalogIcon = new LabIcon({
  name: 'uc-jupyter:catalog',
  svgstr: svg(
    '<path d="M12 2C7.6 2 4 3.3 4 5v14c0 1.7 3.6 3 8 3s8-1.3 8-3V5c0-1.7-3.6-3-8-3zm0 2c3.9 0 6 1.1 6 1s-2.1 1-6 1-6-1-6-1 2.1-1 6-1zm6 15c0 .1-2.1 1-6 1s-6-.9-6-1v-2.3c1.5.8 3.7 1.3 6 1.3s4.5-.5 6-1.3zm0-5c0 .1-2.1 1-6 1s-6-.9-6-1v-2.3c1.5.8 3.7 1.3 6 1.3s4.5-.5 6-1.3zm0-5c0 .1-2.1 1-6 1s-6-.9-6-1V6.7C7.5 7.5 9.7 8 12 8s4.5-.5 6-1.3z"/>'
  )
});

/** Stacked sheets: schemas. */
export const schemaIcon = new LabIcon({
  name: 'uc-jupyter:schema',
  svgstr: svg('<path d="M12 3 2 8l10 5 10-5zm-7.5 8.3L2 12.5l10 5 10-5-2.5-1.2-7.5 3.7zm0 4.5L2 17l10 5 10-5-2.5-1.2-7.5 3.7z"/>')
});

/** A box: volumes. */
export const volumeIcon = new LabIcon({
  name: 'uc-jupyter:volume',
  svgstr: svg('<path d="M3 5v14a2 2 0 0 0 2 2h14a2 2 0 0 0 2-2V5a2 2 0 0 0-2-2H5a2 2 0 0 0-2 2zm2 0h14v4H5zm0 6h14v8H5zm3-5v2h2V6z"/>')
});

/** A narrow bar: table columns. */
export const columnIcon = new LabIcon({
  name: 'uc-jupyter:column',
  svgstr: svg('<path d="M9 3h6v18H9zm2 2v14h2V5z"/>')
});

export function iconFor(kind: NodeKind): LabIcon {
  switch (kind) {
    case 'catalog':
      return catalogIcon;
    case 'schema':
      return schemaIcon;
    case 'table':
      return tableRowsIcon;
    case 'volume':
      return volumeIcon;
    case 'column':
      return columnIcon;
    case 'directory':
      return folderIcon;
    default:
      return fileIcon;
  }
}
